package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
)

// MaxKeyBytes bounds an artifact key.
const MaxKeyBytes = 512

// CheckKey accepts a key: 1 to MaxKeyBytes bytes of "/"-separated segments
// of [A-Za-z0-9._-], no segment empty, no ".." anywhere (so no "." or ".."
// segment either: "." alone is refused too). Errors wrap
// broker.ErrBadRequest.
func CheckKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: key is required", broker.ErrBadRequest)
	}
	if len(k) > MaxKeyBytes {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", broker.ErrBadRequest, len(k), MaxKeyBytes)
	}
	if k[0] == '/' {
		return fmt.Errorf("%w: key %q starts with '/': keys are relative to the tenant's artifacts", broker.ErrBadRequest, clip(k))
	}
	if strings.Contains(k, "..") {
		return fmt.Errorf("%w: key %q contains \"..\"", broker.ErrBadRequest, clip(k))
	}
	for seg := range strings.SplitSeq(k, "/") {
		if seg == "" || seg == "." {
			return fmt.Errorf("%w: key %q has an empty or \".\" segment", broker.ErrBadRequest, clip(k))
		}
		for i := 0; i < len(seg); i++ {
			if !keyByte(seg[i]) {
				return fmt.Errorf("%w: key %q: segments are made of A-Z, a-z, 0-9, '.', '_' and '-'", broker.ErrBadRequest, clip(k))
			}
		}
	}
	return nil
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// TenantDir returns the path segment a tenant's artifacts live under: the
// tenant itself when it is 1 to 64 bytes of [A-Za-z0-9._-] not starting
// with '.', else "~" and 32 hex digits of its SHA-256. No safe name starts
// with '~', so two tenants never share a segment.
func TenantDir(tenant string) string {
	if len(tenant) > 0 && len(tenant) <= 64 && tenant[0] != '.' {
		safe := true
		for i := 0; i < len(tenant); i++ {
			if !keyByte(tenant[i]) {
				safe = false
				break
			}
		}
		if safe {
			return tenant
		}
	}
	sum := sha256.Sum256([]byte(tenant))
	return "~" + hex.EncodeToString(sum[:16])
}

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
