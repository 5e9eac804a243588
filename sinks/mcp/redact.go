package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/gatehouse/gatehouse/sinks/provider"
)

// redacted stands where a person's credential was.
const redacted = "[credential]"

// secretForms are the spellings of a credential a server may echo: as
// given, and base64 (a Basic header, a debugging dump).
func secretForms(cred provider.Credential) []string {
	if cred.Token.IsZero() {
		return nil
	}
	tok := cred.Token.Reveal()
	if len(tok) < 4 { // too short to tell from other text; never echoed as such
		return []string{tok}
	}
	return []string{tok, base64.StdEncoding.EncodeToString([]byte(tok)), base64.RawStdEncoding.EncodeToString([]byte(tok)),
		base64.URLEncoding.EncodeToString([]byte(tok)), base64.RawURLEncoding.EncodeToString([]byte(tok))}
}

// redactText removes cred's token from s (an error's text, a log line).
func redactText(s string, cred provider.Credential) string {
	for _, f := range secretForms(cred) {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

// redactResult removes cred's token from a result (JSON) before it goes
// to the agent: every string of the document, keys too, is looked at as
// decoded, so an echo the server spelled with escapes (\u0074ok...) is
// caught as well as a plain one. A server holds the person's credential
// to act for them; the agent never does, and a chatty server (a debugging
// tool that prints its environment or the request's headers) must not
// hand it over. A document that cannot be decoded is redacted as text.
func redactResult(body []byte, cred provider.Credential) []byte {
	forms := secretForms(cred)
	if len(forms) == 0 {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(redactText(string(body), cred))
	}
	out, err := json.Marshal(redactValue(v, cred))
	if err != nil {
		return []byte(redactText(string(body), cred))
	}
	return out
}

func redactValue(v any, cred provider.Credential) any {
	switch x := v.(type) {
	case string:
		return redactText(x, cred)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], cred)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redactText(k, cred)] = redactValue(e, cred)
		}
		return out
	}
	return v
}
