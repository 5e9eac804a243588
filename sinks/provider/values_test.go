package provider

import (
	"net/url"
	"testing"
)

// TestValues: the values scope limits read, and a limited name that any
// common server could read from another copy (twice, up to case, nested
// or mangled, or merged from the query) has no number, so the limit
// refuses.
func TestValues(t *testing.T) {
	const js, form = "application/json", "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, ct, body string
		query          url.Values
		want           string // values["amount"]; "-" for none
	}{
		{"json", js, `{"amount":"50","memo":"x"}`, nil, "50"},
		{"json number", js, `{"amount":50.5}`, nil, "50.5"},
		{"json nested", js, `{"refund":{"amount":"99999"}}`, nil, "-"},
		{"json up to case", js, `{"amount":"50","Amount":"99999"}`, nil, sentTwice},
		{"json and query", js, `{"amount":"50"}`, url.Values{"amount": {"99999"}}, sentTwice},
		{"json and query up to case", js, `{"amount":"50"}`, url.Values{"AMOUNT": {"99999"}}, sentTwice},
		{"json and query list", js, `{"amount":"50"}`, url.Values{"amount[]": {"99999"}}, sentTwice},
		{"json and query nested", js, `{"amount":"50"}`, url.Values{"amount[x]": {"99999"}}, sentTwice},
		{"json and another query name", js, `{"amount":"50"}`, url.Values{"expand": {"lines"}}, "50"},
		{"form", form, "amount=50", nil, "50"},
		{"form twice", form, "amount=50&amount=99999", nil, sentTwice},
		{"form list", form, "amount=50&amount[]=99999", nil, sentTwice},
		{"form leading space (PHP)", form, "amount=50&%20amount=99999", nil, sentTwice},
		{"form dot (PHP)", form, "amount_=50&amount.=99999", nil, "-"},
		{"form NUL", form, "amount=50&amount%00x=99999", nil, sentTwice},
		{"form and query", form, "amount=50", url.Values{"Amount": {"99999"}}, sentTwice},
		{"text", "text/plain", `{"amount":"50"}`, nil, "-"},
	} {
		v, ok := values([]byte(tc.body), tc.ct, tc.query)["amount"]
		if !ok {
			v = "-"
		}
		if v != tc.want {
			t.Errorf("%s: amount %q, want %q", tc.name, v, tc.want)
		}
	}
	if v := values([]byte("amount_=50&amount.=99999"), form, nil); v["amount_"] != sentTwice {
		t.Errorf("PHP reads amount. as amount_: %q", v)
	}
}
