package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// unambiguous refuses, wrapping broker.ErrBadRequest, params that two JSON
// parsers could read differently: a key twice in one object, at any depth
// (a server whose parser keeps the first would run what Gatehouse, which
// keeps the last, did not decide), keys that differ only in case or
// Unicode form ("iban" and "IBAN": Go's encoding/json, .NET and Jackson
// with case-insensitive properties match both to one field, while
// grounding, scope values and the person approving read them as two),
// bytes that are not UTF-8 and lone surrogate escapes, and a number that
// a 64-bit float does not hold exactly as written (12345678901234567890:
// an approval's digest compares numbers as RFC 8785 does, as doubles, so
// an approval of 12345678901234567000 would let 12345678901234567890
// through to a server that reads big integers exactly). The decision,
// the approval's digest, grounding and the upstream server then all read
// the same arguments. The error names the problem, never a value.
func unambiguous(raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	dups, err := strictjson.Scan(raw, strictjson.Options{Fold: true})
	if err != nil {
		for _, e := range []error{strictjson.ErrInvalidUTF8, strictjson.ErrSurrogate, strictjson.ErrTooDeep} {
			if errors.Is(err, e) {
				return fmt.Errorf("%w: params cannot be read one way: %v", broker.ErrBadRequest, e)
			}
		}
		return fmt.Errorf("%w: params: %v", broker.ErrBadRequest, strictjson.ErrSyntax)
	}
	if len(dups) > 0 {
		d := dups[0]
		how := "twice"
		if d.Folded {
			how = "twice, spelled differently only in case or Unicode form,"
		}
		return fmt.Errorf("%w: params: the key %s appears %s in one object, which servers read in different ways; send each argument once, in one spelling",
			broker.ErrBadRequest, clip(strictjson.PathText(d.Path, "$")), how)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: params: %v", broker.ErrBadRequest, strictjson.ErrSyntax)
	}
	if !approval.ExactNumbers(v) {
		return fmt.Errorf("%w: params: a number has more digits than a 64-bit float holds exactly, so an approval could not tell it from a nearby one; send it as a string", broker.ErrBadRequest)
	}
	return nil
}
