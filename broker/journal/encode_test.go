package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
	"github.com/gatehouse/gatehouse/policy"
)

// twoStepLine is how lines were made before the writer wrote them in
// canonical form directly: encoding/json, RFC 8785 canonicalisation, then
// "hash" inserted at its sorted place. It is the reference the direct
// encoding must equal byte for byte.
func twoStepLine(t *rapid.T, body any) ([]byte, string) {
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	h := hex.EncodeToString(sum[:])
	line, err := insertMember(c, "hash", []byte(`"`+h+`"`))
	if err != nil {
		t.Fatal(err)
	}
	return line, h
}

// anyString draws strings that exercise escaping: quotes, backslashes,
// control characters, HTML characters, U+2028, non-ASCII and invalid
// UTF-8.
func anyString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[a-z_0-9-]{0,12}`),
		rapid.Custom(func(t *rapid.T) string {
			parts := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "\"", "\\", "\x00", "\x1f", "\n", "<", ">", "&", "\u2028", "é", "😂", "\xff", "/", "\u007f"}), 0, 8).Draw(t, "parts")
			var b bytes.Buffer
			for _, p := range parts {
				b.WriteString(p)
			}
			return b.String()
		}),
	)
}

// TestEncodeMatchesTwoStep: event and head lines written directly are
// the two-step lines, for events holding every data type the broker
// records, with strings that need escaping and random times.
func TestEncodeMatchesTwoStep(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		str := anyString()
		data := rapid.OneOf(
			rapid.Custom(func(t *rapid.T) any {
				return Decision{
					ActingFor:     policy.Principal{Tenant: str.Draw(t, "tenant"), Person: str.Draw(t, "person")},
					ScopesChecked: rapid.SliceOf(str).Draw(t, "scopes"), PolicyDigest: str.Draw(t, "pd"),
					Mode: policy.Mode(str.Draw(t, "mode")), Sink: policy.Sink(str.Draw(t, "sink")), Action: str.Draw(t, "action"),
					Target: str.Draw(t, "target"), Size: rapid.Int64().Draw(t, "size"), Confined: rapid.Bool().Draw(t, "confined"),
					Citations: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Citation {
						return Citation{Run: str.Draw(t, "r"), Effect: str.Draw(t, "e"), Digest: str.Draw(t, "d"), Path: str.Draw(t, "p")}
					}), 0, 3).Draw(t, "citations"),
					Outcome: Outcome(str.Draw(t, "outcome")), Enforced: rapid.Bool().Draw(t, "enforced"),
					Reasons: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) policy.Reason {
						return policy.Reason{Refusal: policy.Refusal(str.Draw(t, "ref")), Rule: str.Draw(t, "rule"), Detail: str.Draw(t, "detail")}
					}), 0, 3).Draw(t, "reasons"),
				}
			}),
			rapid.Custom(func(t *rapid.T) any {
				return RunOpen{ActingFor: policy.Principal{Tenant: str.Draw(t, "tenant")}, Scopes: []string{},
					Mandate: &policy.Mandate{Systems: rapid.SliceOf(str).Draw(t, "systems"),
						ExpiresAt: time.Unix(rapid.Int64Range(0, 1<<34).Draw(t, "exp"), 0).UTC()}}
			}),
			rapid.Custom(func(t *rapid.T) any {
				return Result{Status: str.Draw(t, "status"), Size: rapid.Int64().Draw(t, "size"),
					Detail: rapid.MapOf(str, str).Draw(t, "detail")}
			}),
			rapid.Custom(func(t *rapid.T) any {
				return ApprovalDecision{Approval: str.Draw(t, "a"), Roles: rapid.SliceOf(str).Draw(t, "roles"), Approved: rapid.Bool().Draw(t, "ok")}
			}),
		).Draw(rt, "data")
		raw, err := canon.Marshal(data)
		if err != nil {
			rt.Fatal(err)
		}
		e := Event{V: Version, ID: str.Draw(rt, "id"), Run: str.Draw(rt, "run"), Seq: rapid.Uint64().Draw(rt, "seq"),
			Type: Type(str.Draw(rt, "type")), Effect: str.Draw(rt, "effect"), Prev: str.Draw(rt, "prev"),
			Time: time.Unix(rapid.Int64Range(0, 1<<34).Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "ns")).UTC(),
			Data: raw}
		// The broker's data, canon.Marshal, is what json.Marshal + jcs make.
		oldData, _ := json.Marshal(data)
		if want, _ := jcs.Transform(oldData); !bytes.Equal(raw, want) {
			rt.Fatalf("data:\n got  %s\n want %s", raw, want)
		}
		type eventBody struct {
			V      int             `json:"v"`
			ID     string          `json:"id"`
			Run    string          `json:"run"`
			Seq    uint64          `json:"seq"`
			Type   Type            `json:"type"`
			Time   time.Time       `json:"time"`
			Effect string          `json:"effect,omitempty"`
			Data   json.RawMessage `json:"data"`
			Prev   string          `json:"prev"`
		}
		want, wantHash := twoStepLine(rt, eventBody{V: e.V, ID: e.ID, Run: e.Run, Seq: e.Seq, Type: e.Type, Time: e.Time, Effect: e.Effect, Data: oldData, Prev: e.Prev})
		got, h, err := encodeEvent(e)
		if err != nil || h != wantHash || !bytes.Equal(got, want) {
			rt.Fatalf("event (%v):\n got  %s %s\n want %s %s", err, got, h, want, wantHash)
		}

		he := HeadEntry{Seq: rapid.Uint64().Draw(rt, "hseq"), Run: str.Draw(rt, "hrun"), RunSeq: rapid.Uint64().Draw(rt, "rs"),
			Event: str.Draw(rt, "ev"), Time: e.Time, Prev: str.Draw(rt, "hprev")}
		type headBody struct {
			Seq    uint64    `json:"seq"`
			Run    string    `json:"run"`
			RunSeq uint64    `json:"run_seq"`
			Event  string    `json:"event"`
			Time   time.Time `json:"time"`
			Prev   string    `json:"prev"`
		}
		want, wantHash = twoStepLine(rt, headBody{Seq: he.Seq, Run: he.Run, RunSeq: he.RunSeq, Event: he.Event, Time: he.Time, Prev: he.Prev})
		got, h, err = encodeHead(he)
		if err != nil || h != wantHash || !bytes.Equal(got, want) {
			rt.Fatalf("head (%v):\n got  %s %s\n want %s %s", err, got, h, want, wantHash)
		}
	})
}

// Data from elsewhere that is not canonical is canonicalised once.
func TestEncodeCanonicalisesForeignData(t *testing.T) {
	e := Event{V: 1, ID: "ev_1", Run: "r_1", Seq: 1, Type: TypeOutcome, Time: time.Unix(0, 0).UTC(),
		Data: json.RawMessage(`{ "b" : 1.50, "a":"\u00e9<" }`)}
	line, _, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"data":{"a":"é<","b":1.5}`)) {
		t.Fatalf("line %s", line)
	}
	e.Data = json.RawMessage(`{"a":`)
	if _, _, err := encodeEvent(e); err == nil {
		t.Fatal("invalid data encoded")
	}
}

func BenchmarkEncodeEvent(b *testing.B) {
	raw, _ := canon.Marshal(decision(OutcomeAllowed))
	e := Event{V: 1, ID: "ev_01kbq0s4y8j1m0f7m5mz0r4k4x", Run: "r_01kbq0s4y8j1m0f7m5mz0r4k4x", Seq: 17,
		Type: TypeDecision, Effect: "e_01kbq0s4y8j1m0f7m5mz0r4k4x", Time: time.Now().UTC(), Data: raw,
		Prev: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	for b.Loop() {
		if _, _, err := encodeEvent(e); err != nil {
			b.Fatal(err)
		}
	}
}
