package provider

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"

	"github.com/gatehouse/gatehouse/grounding/paramnames"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// values returns the named scalar values of a body for scope limits: the
// top-level strings and numbers of a JSON object, or the fields of a form,
// as written. A name sent twice, or that common servers read as the same
// field as another name of the body or the query (paramnames.Clashes:
// "amount" and "Amount", "amount" and "amount[]", " amount", a body field
// and a query name frameworks merge), gets a value naming both, which is
// not a number, so a limit on it refuses rather than check one copy while
// the provider reads the other. Other bodies have no values.
func values(body []byte, contentType string, query url.Values) map[string]string {
	out := rawValues(body, contentType)
	if len(out) == 0 {
		return out
	}
	literal := isJSONType(contentType)
	if literal && len(query) == 0 {
		return foldTwice(out)
	}
	names := make([]paramnames.Name, 0, len(out)+len(query))
	keys := make([]string, 0, len(out)+len(query))
	for k := range out {
		names, keys = append(names, paramnames.Name{Key: k, Literal: literal}), append(keys, k)
	}
	inBody := len(names)
	for k := range query {
		names, keys = append(names, paramnames.Name{Key: k}), append(keys, k)
	}
	for _, c := range paramnames.Clashes(names) {
		for _, i := range []int{c.A, c.B} {
			if i < inBody {
				out[keys[i]] = sentTwice
			}
		}
	}
	if literal { // JSON keys are literal to Clashes; equal up to case they are one field too
		return foldTwice(out)
	}
	return dropEmpty(out)
}

// foldTwice marks the names of out equal up to case folding and NFC as
// sent twice, then drops those without a usable value.
func foldTwice(out map[string]string) map[string]string {
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
	return dropEmpty(out)
}

func dropEmpty(out map[string]string) map[string]string {
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
