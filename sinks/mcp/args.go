package mcp

import (
	"errors"
	"fmt"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// unambiguous refuses, wrapping broker.ErrBadRequest, params that two JSON
// parsers could read differently: a key twice in one object, at any depth
// (a server whose parser keeps the first would run what Gatehouse, which
// keeps the last, did not decide), keys that differ only in case or
// Unicode form ("iban" and "IBAN": Go's encoding/json, .NET and Jackson
// with case-insensitive properties match both to one field, while
// grounding, scope values and the person approving read them as two),
// bytes that are not UTF-8 and lone surrogate escapes. The decision,
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
	return nil
}
