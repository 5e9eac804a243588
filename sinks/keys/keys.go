// Package keys checks the names agents give what they store (artifact and
// memory keys): "/"-separated segments of [A-Za-z0-9._-], none empty or
// ".", no ".." anywhere. Such a key can be joined into a path, an object
// name or a store key without escaping the tenant's or person's space.
package keys

import (
	"fmt"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
)

// Check accepts k as a key of at most max bytes. Errors wrap
// broker.ErrBadRequest and quote the key shortened.
func Check(k string, max int) error {
	if k == "" {
		return fmt.Errorf("%w: key is required", broker.ErrBadRequest)
	}
	if len(k) > max {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", broker.ErrBadRequest, len(k), max)
	}
	if k[0] == '/' {
		return fmt.Errorf("%w: key %q starts with '/': keys are relative", broker.ErrBadRequest, Clip(k))
	}
	if strings.Contains(k, "..") {
		return fmt.Errorf("%w: key %q contains \"..\"", broker.ErrBadRequest, Clip(k))
	}
	for seg := range strings.SplitSeq(k, "/") {
		if seg == "" || seg == "." {
			return fmt.Errorf("%w: key %q has an empty or \".\" segment", broker.ErrBadRequest, Clip(k))
		}
		for i := 0; i < len(seg); i++ {
			if !Byte(seg[i]) {
				return fmt.Errorf("%w: key %q: segments are made of A-Z, a-z, 0-9, '.', '_' and '-'", broker.ErrBadRequest, Clip(k))
			}
		}
	}
	return nil
}

// Byte reports whether c may appear in a key segment.
func Byte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Clip shortens untrusted text for an error message and makes it valid
// UTF-8.
func Clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
