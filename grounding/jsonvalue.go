package grounding

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// maxDepth bounds how deeply a request body or record may nest.
const maxDepth = 512

var errTooDeep = errors.New("nested too deeply")

// jsonDoc is a JSON document decoded without floating point (numbers are
// json.Number) and with every object key that appears twice noted, since
// encoding/json would silently keep the last one.
type jsonDoc struct {
	root any
	// dups are the paths, written after a root ("request.json" or a
	// binding's name), of keys that appear more than once in one object.
	dups []string
}

// decodeJSON reads exactly one JSON value from data. prefix names the
// root in dups.
func decodeJSON(data []byte, prefix string) (jsonDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, path: []string{prefix}}
	root, err := w.value(0)
	if err != nil {
		return jsonDoc{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jsonDoc{}, errors.New("more than one JSON value")
	}
	return jsonDoc{root: root, dups: w.dups}, nil
}

type walker struct {
	dec  *json.Decoder
	path []string // the segments leading to the value being read
	dups []string
}

func (w *walker) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := w.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch d {
	case '{':
		obj := map[string]any{}
		for w.dec.More() {
			kt, err := w.dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			w.path = append(w.path, "."+k)
			v, err := w.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, seen := obj[k]; seen {
				w.dups = append(w.dups, strings.Join(w.path, ""))
			}
			w.path = w.path[:len(w.path)-1]
			obj[k] = v
		}
		if _, err := w.dec.Token(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		arr := []any{}
		for w.dec.More() {
			w.path = append(w.path, "["+strconv.Itoa(len(arr))+"]")
			v, err := w.value(depth + 1)
			if err != nil {
				return nil, err
			}
			w.path = w.path[:len(w.path)-1]
			arr = append(arr, v)
		}
		if _, err := w.dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, errors.New("unexpected " + d.String())
}
