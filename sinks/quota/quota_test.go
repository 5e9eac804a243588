package quota

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		used, delta, limit int64
		refused            bool
	}{
		{0, 10, 10, false}, {0, 11, 10, true}, {10, 0, 10, false}, {10, -5, 10, false},
		{20, -5, 10, false}, // over budget already (the budget was lowered): shrinking still fits
		{20, 1, 10, true}, {9, 1, 10, false}, {10, 1, 10, true},
	} {
		err := Check("memory", "--memory-quota-mb", "delete memories it no longer needs (memory delete)", c.used, c.delta, c.limit)
		if (err != nil) != c.refused {
			t.Errorf("Check(%d, %d, %d) = %v", c.used, c.delta, c.limit, err)
		}
	}
	err := fmt.Errorf("put: %w", Check("artifact", "--artifact-quota-mb", "delete artifacts", 900, 200, 1000))
	var qe *Error
	if !errors.As(err, &qe) || qe.ErrorType() != ErrorType || !errors.Is(err, broker.ErrQuotaExceeded) {
		t.Fatalf("%v does not match", err)
	}
	body := broker.NewErrorBody(err)
	for _, want := range []string{"900 of its 1000 bytes", "needs 200 more", "nothing was stored", "delete artifacts", "--artifact-quota-mb"} {
		if !strings.Contains(body.Message, want) {
			t.Errorf("no %q in %q", want, body.Message)
		}
	}
	if body.Code != broker.CodeQuotaExceeded {
		t.Fatalf("code %s", body.Code)
	}
}
