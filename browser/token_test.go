package browser

import "testing"

// A one-time token passes only the request it was issued for (method and
// host), once: a follow-on request that carries it to another site, or
// with another method, is decided.
func TestTokenBoundToItsRequest(t *testing.T) {
	s := &session{}
	tok := s.token("POST", "http://site-a.test/submit")
	if s.spend(tok, "POST", "http://site-b.test/submit") {
		t.Fatal("a token passed a request to another host")
	}
	tok = s.token("POST", "http://site-a.test/submit")
	if s.spend(tok, "PUT", "http://site-a.test/submit") {
		t.Fatal("a token passed a request with another method")
	}
	tok = s.token("post", "http://SITE-A.test/submit")
	if !s.spend(tok, "POST", "http://site-a.test/other") {
		t.Fatal("the request the token was issued for was not passed")
	}
	if s.spend(tok, "POST", "http://site-a.test/other") {
		t.Fatal("a token passed twice")
	}
}
