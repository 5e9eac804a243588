package mcp

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/provider"
)

// A result that echoes the person's credential reaches the agent without
// it: plain, JSON-escaped, base64, in keys and nested values.
func TestRedactResultRemovesTheCredential(t *testing.T) {
	const tok = "tok-ada-s3cr3t/+="
	cred := provider.Credential{Token: provider.NewSecret(tok)}
	b64 := base64.StdEncoding.EncodeToString([]byte(tok))
	body := `{"content":[{"type":"text","text":"env: UPSTREAM_TOKEN=` + tok + `"}],` +
		`"structuredContent":{"escaped":"\u0074ok-ada-s3cr3t\/+=","basic":"Basic ` + b64 + `","` + tok + `":[1,"x ` + tok + ` y"]},"isError":false}`
	out := string(redactResult([]byte(body), cred))
	if !json.Valid([]byte(out)) {
		t.Fatalf("not JSON: %s", out)
	}
	var v any
	_ = json.Unmarshal([]byte(out), &v)
	decoded, _ := json.Marshal(v)
	for _, s := range []string{out, string(decoded)} {
		if strings.Contains(s, tok) || strings.Contains(s, "s3cr3t") || strings.Contains(s, b64) {
			t.Fatalf("the credential is still there: %s", s)
		}
	}
	if !strings.Contains(out, "UPSTREAM_TOKEN=[credential]") || !strings.Contains(out, `"isError":false`) {
		t.Fatalf("redacted result: %s", out)
	}
	if got := redactResult([]byte(body), provider.Credential{}); string(got) != body {
		t.Fatalf("without a credential the result changed: %s", got)
	}
	if got := redactText("whoami failed for Bearer "+tok, cred); strings.Contains(got, tok) {
		t.Fatalf("error text: %s", got)
	}
}

// The credential goes only to the catalogued server's own origin.
func TestCredentialOnlyForTheCataloguedOrigin(t *testing.T) {
	for _, tc := range []struct {
		u    string
		want bool
	}{
		{"http://127.0.0.1:8080/mcp", true},
		{"http://127.0.0.1:8080/other", true},
		{"http://127.0.0.1:8081/mcp", false},
		{"https://127.0.0.1:8080/mcp", false},
		{"http://localhost:8080/mcp", false},
		{"http://evil.example/mcp", false},
	} {
		u, _ := url.Parse(tc.u)
		if got := sameOrigin("http://127.0.0.1:8080/mcp", u); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.u, got, tc.want)
		}
	}
}
