package kvcas

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestConflict(t *testing.T) {
	if !Conflict(fmt.Errorf("create: %w", jetstream.ErrKeyExists)) || !Conflict(&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}) {
		t.Fatal("a lost compare-and-swap was not seen")
	}
	if Conflict(jetstream.ErrKeyNotFound) || Conflict(nil) || Conflict(&jetstream.APIError{ErrorCode: jetstream.JSErrCodeMessageNotFound}) {
		t.Fatal("another error counted as a lost compare-and-swap")
	}
}
