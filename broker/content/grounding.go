package content

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// Grounding is what a grounding check was given when an effect was
// decided: the rules file (by digest), the call exactly as it was about to
// leave, the caller's input, the time, and every answer the record store
// and rereads gave. It travels inside the Request blob (so its digest is
// bound by the decision's request_digest and it belongs to the same
// person); the records' bodies are kept as their own blobs (KindRecord),
// named by the digests here, which are the digests the decision's
// citations and the reading effect's outcome record.
//
// Replay answers every Lookup, WrittenAt, SpentThrough and Reread from
// it, so the check runs again without a record store, a provider or a
// broker.
type Grounding struct {
	// RulesDigest is the digest of the grounding rules file's bytes, kept
	// as a KindGrounding blob; "" when the rules could not be read (every
	// call was refused, and replay takes the recorded result).
	RulesDigest string `json:"rules_digest"`
	// Workflow is the workflow the records belong to (the run's root).
	Workflow string `json:"workflow"`
	// Agent is the asking agent ("" the shared one), whose ungrounded
	// changes in any workflow count (grounding.AgentScope).
	Agent string        `json:"agent,omitempty"`
	Call  GroundingCall `json:"call"`
	// Caller is the run's input as the application gave it (verbatim).
	Caller json.RawMessage `json:"caller,omitempty"`
	// Now is the time the check was given.
	Now     time.Time     `json:"now"`
	Lookups []RecordsRead `json:"lookups,omitempty"`
	Writes  []WriteMark   `json:"writes,omitempty"`
	// Spends are the answers of SpentThrough: At is the read time through
	// which the path's records were spent.
	Spends  []WriteMark   `json:"spends,omitempty"`
	Rereads []RecordsRead `json:"rereads,omitempty"`
}

// GroundingCall is grounding.Call with stable JSON names. Body is the
// bytes that were to be sent (base64 in JSON).
type GroundingCall struct {
	Provider    string     `json:"provider"`
	Method      string     `json:"method"`
	Path        string     `json:"path"`
	Query       url.Values `json:"query,omitempty"`
	Body        []byte     `json:"body,omitempty"`
	ContentType string     `json:"content_type,omitempty"`
}

// RecordsRead is one answer of the record store (Lookup) or of a reread:
// the records it returned, without their bodies, or the error it gave.
type RecordsRead struct {
	Provider string       `json:"provider"`
	Path     string       `json:"path"`
	Records  []RecordMeta `json:"records,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// RecordMeta is a grounding.Record without its body: the body is the
// blob named by Digest.
type RecordMeta struct {
	Provider string    `json:"provider"`
	Path     string    `json:"path"`
	ReadAt   time.Time `json:"read_at"`
	// The record's citation: the run and effect whose outcome recorded
	// the response, "provider:path".
	Run       string `json:"run"`
	Effect    string `json:"effect"`
	CitedPath string `json:"cited_path,omitempty"`
	// Digest is the digest of the body the store returned, the blob's
	// name; CitedDigest is the citation's digest when it differs (a
	// record store holding a body its citation does not describe).
	Digest      string `json:"digest"`
	CitedDigest string `json:"cited_digest,omitempty"`
}

// WriteMark is one answer of WrittenAt: the workflow's first write to the
// path (zero: never), or the error the store gave.
type WriteMark struct {
	// Workflow is the scope asked when it is not the check's workflow (an
	// agent's, grounding.AgentScope); "" is the check's.
	Workflow string    `json:"workflow,omitempty"`
	Provider string    `json:"provider"`
	Path     string    `json:"path"`
	At       time.Time `json:"at,omitzero"`
	Error    string    `json:"error,omitempty"`
}

// Digests lists the record blobs g names, each once, in order.
func (g *Grounding) Digests() []string {
	if g == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, rs := range [][]RecordsRead{g.Lookups, g.Rereads} {
		for _, r := range rs {
			for _, m := range r.Records {
				if !seen[m.Digest] && ValidDigest(m.Digest) {
					seen[m.Digest] = true
					out = append(out, m.Digest)
				}
			}
		}
	}
	return out
}

// AddGrounding keeps a grounding rules file's source (in ModeFull) so
// replay can run the check again under the rules in force, and returns its
// digest (the digest Grounding.RulesDigest records). Call it whenever the
// provider sink's rules change.
func (c *Capturer) AddGrounding(name string, src []byte) (string, error) {
	if c.mode != ModeFull {
		return DigestOf(src), nil
	}
	return c.store.Put(src, Ref{Kind: KindGrounding, Name: name})
}

// KeepRecord keeps (in ModeFull) the body of a provider response the
// provider sink keeps as a grounding record, under its digest (the digest
// the reading effect's outcome and later citations record), indexed to
// the run, effect and person, so that erasure of the person and the
// retention limit cover it. In ModeDigests and ModeOff it keeps nothing.
// It returns once the blob is in place.
func (c *Capturer) KeepRecord(_ context.Context, run, effect string, forWhom policy.Principal, body []byte) error {
	if c.mode != ModeFull {
		return nil
	}
	_, err := c.store.Put(body, Ref{Kind: KindRecord, Run: run, Effect: effect, For: forWhom})
	return err
}

// touchRecords marks the records a decision relied on as used, so that
// retention counts from the last decision that cited them.
func (c *Capturer) touchRecords(g *Grounding) {
	for _, d := range g.Digests() {
		_ = c.store.Touch(d) // erased or never kept: replay says so
	}
}
