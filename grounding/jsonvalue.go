package grounding

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

var errInvalidJSON = errors.New("not one valid JSON value")

// jsonDoc is a JSON document decoded without floating point (numbers are
// json.Number) and with every object key that appears twice noted, since
// encoding/json would silently keep the last one.
type jsonDoc struct {
	root any
	// dups are the keys that appear more than once in one object, by
	// path from the root ("request.json" or a binding's name): written
	// twice, or written in two ways equal after case folding and NFC,
	// which a provider matching fields without regard to case reads as
	// one field.
	dups []dupKey
}

type dupKey struct {
	raw    string // the path as a field path names it
	shown  string // the same with unusual keys elided, for a failure
	folded bool   // the keys differ as written
}

// decodeJSON reads exactly one JSON value from data through strictjson
// (invalid UTF-8, unpaired surrogate escapes and deep nesting are
// errors), noting repeated keys. prefix names the root in dups.
func decodeJSON(data []byte, prefix string) (jsonDoc, error) {
	dups, err := strictjson.Scan(data, strictjson.Options{Fold: true})
	if err != nil {
		return jsonDoc{}, errInvalidJSON
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return jsonDoc{}, errInvalidJSON
	}
	doc := jsonDoc{root: root}
	for _, d := range dups {
		doc.dups = append(doc.dups, dupKey{raw: strictjson.PathText(d.Path, prefix), shown: shownPath(d.Path, prefix), folded: d.Folded})
	}
	return doc, nil
}

// shownPath is a path for a failure: keys that could carry a value are
// shown by their length only (displayKey).
func shownPath(p []strictjson.Step, prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, st := range p {
		if st.Index >= 0 {
			b.WriteString("[" + strconv.Itoa(st.Index) + "]")
			continue
		}
		b.WriteByte('.')
		b.WriteString(displayKey(st.Key))
	}
	return b.String()
}
