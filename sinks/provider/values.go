package provider

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// values returns the named scalar values of a body for scope limits: the
// top-level strings and numbers of a JSON object, or the fields of a form,
// as written. A name sent twice, or twice up to case folding and NFC
// ("amount" and "Amount", which a provider matching fields without regard
// to case reads as one), gets a value naming both, which is not a number,
// so a limit on it refuses rather than check one copy while the provider
// reads the other. Other bodies have no values.
//
// A top-level name also sent as a query name (up to case) is sent twice
// too: frameworks that merge query and body parameters read one of them.
func values(body []byte, contentType string, query url.Values) map[string]string {
	out := rawValues(body, contentType)
	if len(out) > 0 && len(query) > 0 {
		inQuery := make(map[string]bool, len(query))
		for k := range query {
			inQuery[strictjson.FoldKey(k)] = true
		}
		for k := range out {
			if inQuery[strictjson.FoldKey(k)] {
				out[k] = sentTwice
			}
		}
	}
	if len(out) > 1 {
		first := make(map[string]string, len(out))
		for k := range out {
			f := strictjson.FoldKey(k)
			if prev, ok := first[f]; ok {
				out[k], out[prev] = sentTwice, sentTwice
				continue
			}
			first[f] = k
		}
	}
	for k, v := range out {
		if v == "" {
			delete(out, k) // seen, but no value a limit can use
		}
	}
	return out
}

func rawValues(body []byte, contentType string) map[string]string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return nil
		}
		out := make(map[string]string, len(q))
		for k, vs := range q {
			if len(vs) == 1 {
				out[k] = vs[0]
			} else {
				out[k] = sentTwice
			}
		}
		return out
	case isJSONType(contentType):
		return jsonValues(body)
	}
	return nil
}

// sentTwice stands for a value whose name appears more than once.
const sentTwice = "(sent more than once)"

func jsonValues(body []byte) map[string]string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	out := map[string]string{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		s, scalar := scalarText(v)
		if _, seen := out[k]; seen {
			out[k] = sentTwice
			continue
		}
		if scalar {
			out[k] = s
		} else {
			out[k] = "" // seen, but no value a limit can use
		}
	}
	return out
}

// scalarText returns a JSON string's text or a number as written.
func scalarText(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, s != ""
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(v), true
	}
	return "", false
}
