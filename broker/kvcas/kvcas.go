// Package kvcas tells a JetStream KV compare-and-swap that lost from a
// store that failed.
//
// nats.go reports a lost Create or Update in several forms: ErrKeyExists
// (a Create of a live key), ErrKeyRevisionMismatch (an Update), and the
// bare API error "wrong last sequence": code 10071, or 10164 from servers
// that report it so for replicated streams, which matches neither
// sentinel on the path where Create finds a deleted key and updates its
// marker. Code that checks one form only takes a lost race for a store
// failure, and only where the other form is used.
package kvcas

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Conflict reports whether err is a KV Create or Update that lost: the key
// was created or changed since it was read.
func Conflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
