package artifact

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/gatehouse/gatehouse/sinks/keys"
)

// MaxKeyBytes bounds an artifact key.
const MaxKeyBytes = 512

// CheckKey accepts an artifact key (see package keys). Errors wrap
// broker.ErrBadRequest.
func CheckKey(k string) error { return keys.Check(k, MaxKeyBytes) }

// TenantDir returns the path segment a tenant's artifacts live under: the
// tenant itself when it is 1 to 64 bytes of [A-Za-z0-9._-] not starting
// with '.', else "~" and 32 hex digits of its SHA-256. No safe name starts
// with '~', so two tenants never share a segment.
func TenantDir(tenant string) string {
	if len(tenant) > 0 && len(tenant) <= 64 && tenant[0] != '.' {
		safe := true
		for i := 0; i < len(tenant); i++ {
			if !keys.Byte(tenant[i]) {
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

func clip(s string) string { return keys.Clip(s) }
