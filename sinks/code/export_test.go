package code

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/policy"
)

// GatewayParams exposes the gateway's request check to the external tests.
func GatewayParams(origin policy.Origin, line []byte) (json.RawMessage, error) {
	return (&gateway{origin: origin}).params(line)
}
