package mcp

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
)

// Params that two parsers read differently are refused before anything is
// decided: a key twice, keys equal but for case or Unicode form, at any
// depth, in the arguments or the params around them; not UTF-8; a lone
// surrogate. The error never carries a value.
func TestDecodeParamsRefusesAmbiguousArguments(t *testing.T) {
	k := &Sink{cat: &Catalogue{Servers: []Server{{Name: "bank", URL: "http://h/mcp"}}}}
	for _, raw := range []string{
		`{"server":"bank","tool":"pay","arguments":{"amount":"5000","amount":"1"}}`,
		`{"server":"bank","tool":"pay","arguments":{"amount":"1","Amount":"5000"}}`,
		`{"server":"bank","tool":"pay","arguments":{"amount":"1","\u0041mount":"5000"}}`,
		`{"server":"bank","tool":"pay","arguments":{"to":{"kind":"a","\u212aind":"b"}}}`, // Kelvin sign
		`{"server":"bank","tool":"pay","arguments":{"list":[{"ſecret":1,"secret":2}]}}`,  // long s
		`{"server":"bank","tool":"read","Tool":"pay","arguments":{}}`,
		`{"server":"bank","tool":"pay","arguments":{"a":"\ud800"}}`,
		"{\"server\":\"bank\",\"tool\":\"pay\",\"arguments\":{\"a\":\"\xff\"}}",
		`{"server":"bank","tool":"pay","arguments":{"ref":12345678901234567890}}`, // the double is ...7168, written ...7000
		`{"server":"bank","tool":"pay","arguments":{"x":[0.10000000000000000001]}}`,
		`{"server":"bank","tool":"pay","arguments":{"x":1e400}}`,
	} {
		_, _, err := k.DecodeParams([]byte(raw))
		if !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", raw, err)
		} else if strings.Contains(err.Error(), "5000") {
			t.Errorf("%s: the error carries a value: %v", raw, err)
		}
	}
	for _, raw := range []string{
		`{"server":"bank","tool":"pay","arguments":{"amount":"1","to":{"amount":"1"}}}`, // the same key in two objects
		`{"server":"bank","tool":"pay"}`,
		`{"server":"bank","tool":"pay","arguments":{"ref":12345678901234567000,"a":0.1,"b":1.50,"c":-2e-3,"d":9007199254740992}}`,
	} {
		if _, _, err := k.DecodeParams([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
