package code_test

import (
	"errors"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
)

// TestMayReplaceKeepsANameWithItsHolder: an entry is replaced only by
// work of the tenant that stored it, of an origin no less trusted; an
// operator's entry (no tenant) by no agent's work.
func TestMayReplaceKeepsANameWithItsHolder(t *testing.T) {
	acme := func(o policy.Origin) code.StoredBy { return code.StoredBy{Tenant: "acme", Person: "ada", Origin: o} }
	for _, c := range []struct {
		old, by code.StoredBy
		ok      bool
	}{
		{acme(policy.OriginModel), acme(policy.OriginModel), true},
		{acme(policy.OriginModel), code.StoredBy{Tenant: "acme", Person: "bea", Origin: policy.OriginModel}, true},
		{acme(policy.OriginModel), acme(policy.OriginShipped), true},
		{acme(""), acme(policy.OriginModel), true},
		{acme(policy.OriginShipped), acme(policy.OriginModel), false},
		{acme(policy.OriginRegistry), acme(""), false},
		{acme(policy.OriginModel), code.StoredBy{Tenant: "globex", Origin: policy.OriginShipped}, false},
		{code.StoredBy{}, acme(policy.OriginShipped), false},
	} {
		err := code.MayReplace(c.old, c.by)
		if c.ok && err != nil || !c.ok && !errors.Is(err, code.ErrIntegrationHeld) {
			t.Errorf("%+v over %+v: %v", c.by, c.old, err)
		}
	}
}
