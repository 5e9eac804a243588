package approval_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	. "github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/approval/approvalredis"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// memJournal keeps recorded events in memory: a hand-written fake of the
// broker's journal, which is not under test here.
type memJournal struct {
	mu     sync.Mutex
	events []*journal.Event
}

func (j *memJournal) Record(_ context.Context, e *journal.Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
	return nil
}

func (j *memJournal) count(t journal.Type) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if e.Type == t {
			n++
		}
	}
	return n
}

func kvStore(t testing.TB) Store {
	t.Helper()
	js := natstest.JetStream(t)
	s, err := NewKVStore(context.Background(), js, "approvals_test", 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func redisStore(t testing.TB) Store {
	t.Helper()
	url, _, _ := sinktest.StartRedis(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return approvalredis.New(rdb, "gatehouse:approval:")
}

var stores = []struct {
	name string
	open func(testing.TB) Store
}{{"kv", kvStore}, {"redis", redisStore}}

func hold(t testing.TB, run string, params string) Hold {
	t.Helper()
	d, args, err := Action{Sink: "provider", Action: "call", Run: run, Params: json.RawMessage(params)}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Hold{Run: run, Effect: "e_1", Tenant: "acme", Person: "pat", Agent: "invoice-bot", Sink: "provider", Action: "call",
		ActionDigest: d, Arguments: args, Need: policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "mfa"}}
}

var reviewer = Decision{Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa"}

func TestActionDigestBindsEveryArgument(t *testing.T) {
	a := Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(`{"amount":"10.00","iban":"DE89"}`)}
	b := a
	b.Params = json.RawMessage(` { "iban" : "DE89", "amount": "10.00" }`)
	c := a
	c.Params = json.RawMessage(`{"amount":"10.01","iban":"DE89"}`)
	d := a
	d.Run = "r2"
	da, args, _ := a.Digest()
	db, _, _ := b.Digest()
	dc, _, _ := c.Digest()
	dd, _, _ := d.Digest()
	if da != db {
		t.Errorf("key order or spacing changed the digest")
	}
	if da == dc || da == dd {
		t.Errorf("a changed argument or run kept the digest")
	}
	if len(args) != 2 || args[0].Name != "amount" || args[0].Value != `"10.00"` {
		t.Errorf("arguments = %+v", args)
	}
	if _, _, err := (Action{Params: json.RawMessage(`[1]`)}).Digest(); !errors.Is(err, ErrBadAction) {
		t.Errorf("non-object params: %v", err)
	}
}

func TestFirstDecisionStandsUnderRace(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			j := &memJournal{}
			s := New(st.open(t), j, Config{})
			ctx := context.Background()
			r, created, err := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
			if err != nil || !created {
				t.Fatalf("request: %v %v", created, err)
			}
			again, created, err := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
			if err != nil || created || again.ID != r.ID {
				t.Fatalf("same action made a second request: %v %v", created, err)
			}
			var won, lost atomic.Int32
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := reviewer
					d.Approved = i%2 == 0
					d.Approver = fmt.Sprintf("rev%d", i)
					_, err := s.Decide(ctx, r.ID, d)
					switch {
					case err == nil:
						won.Add(1)
					case errors.Is(err, ErrAlreadyDecided):
						lost.Add(1)
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 || lost.Load() != 15 {
				t.Fatalf("won %d lost %d, want 1 and 15", won.Load(), lost.Load())
			}
			if n := j.count(journal.TypeApprovalDecision) + j.count(journal.TypeApprovalRefused); n != 1 {
				t.Fatalf("%d decisions recorded", n)
			}
		})
	}
}

func TestApprovedActionClaimedOnce(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			j := &memJournal{}
			s := New(st.open(t), j, Config{})
			ctx := context.Background()
			r, _, err := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, r.ID, "e_x"); !errors.Is(err, ErrAlreadyClaimed) {
				t.Fatalf("claim before approval: %v", err)
			}
			if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
				t.Fatal(err)
			}
			var won atomic.Int32
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Claim(ctx, r.ID, fmt.Sprintf("e_%d", i)); err == nil {
						won.Add(1)
					} else if !errors.Is(err, ErrAlreadyClaimed) {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 || j.count(journal.TypeApprovalClaim) != 1 {
				t.Fatalf("%d claims won, %d recorded; want exactly one", won.Load(), j.count(journal.TypeApprovalClaim))
			}
			got, _ := s.Get(ctx, r.ID)
			if _, err := s.Settle(ctx, r.ID, got.Claim.Effect, "ok"); err != nil {
				t.Fatal(err)
			}
			// The same action again after it ran is a new request.
			next, created, err := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
			if err != nil || !created || next.ID == r.ID {
				t.Fatalf("after settle: created %v id %s err %v", created, next.ID, err)
			}
		})
	}
}

func TestWhoMayApprove(t *testing.T) {
	s := New(kvStore(t), &memJournal{}, Config{})
	ctx := context.Background()
	r, _, err := s.Request(ctx, hold(t, "r1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Decision{
		"the agent":        {Approved: true, Approver: "invoice-bot", Roles: []string{"finance"}, Assurance: "mfa"},
		"the person":       {Approved: true, Approver: "pat", Roles: []string{"finance"}, Assurance: "mfa"},
		"no role":          {Approved: true, Approver: "sam", Roles: []string{"sales"}, Assurance: "mfa"},
		"too little":       {Approved: true, Approver: "sam", Roles: []string{"finance"}, Assurance: "password"},
		"nobody":           {Approved: true, Roles: []string{"finance"}, Assurance: "mfa"},
		"refusal, no role": {Approved: false, Approver: "sam", Assurance: "mfa"},
	} {
		if _, err := s.Decide(ctx, r.ID, d); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v, want ErrNotAllowed", name, err)
		}
	}
	if _, err := s.Decide(ctx, "ap_nope", reviewer); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestClaimNeverSettledIsReconciled(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	j := &memJournal{}
	s := New(kvStore(t), j, Config{Now: clock, ClaimTimeout: time.Minute})
	ctx := context.Background()
	r, _, _ := s.Request(ctx, hold(t, "r1", `{}`))
	if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, r.ID, "e_2"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Sweep(ctx); n != 0 {
		t.Fatalf("a fresh claim was marked unknown")
	}
	if _, err := s.Reconcile(ctx, r.ID, Reconciliation{By: "olga"}); !errors.Is(err, ErrWrongState) {
		t.Fatalf("reconcile a live claim: %v", err)
	}
	now.Add(int64(2 * time.Minute))
	if n, err := s.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("sweep: %d %v", n, err)
	}
	got, _ := s.Get(ctx, r.ID)
	if got.State != StateOutcomeUnknown {
		t.Fatalf("state %s", got.State)
	}
	if _, err := s.Claim(ctx, r.ID, "e_3"); !errors.Is(err, ErrAlreadyClaimed) {
		t.Fatalf("an unknown outcome was claimed again: %v", err)
	}
	// Reconciling needs the rule's roles and assurance, as approving does:
	// a finding that it did not happen lets the agent ask again.
	for _, rc := range []Reconciliation{
		{By: "olga", Reason: "no role"},
		{By: "olga", Roles: []string{"finance"}, Assurance: "password", Reason: "too little assurance"},
		{By: "pat", Roles: []string{"finance"}, Assurance: "mfa", Reason: "the person the work is for"},
	} {
		if _, err := s.Reconcile(ctx, r.ID, rc); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("reconcile by %+v: %v, want ErrNotAllowed", rc, err)
		}
	}
	if _, err := s.Reconcile(ctx, r.ID, Reconciliation{By: "olga", Roles: []string{"finance"}, Assurance: "mfa", Reason: strings.Repeat("x", MaxReason+1)}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a reason over MaxReason: %v", err)
	}
	if j.count(journal.TypeApprovalReconciled) != 0 {
		t.Fatal("a refused reconciliation was recorded")
	}
	got, err := s.Reconcile(ctx, r.ID, Reconciliation{Happened: true, By: "olga", Roles: []string{"finance"}, Assurance: "mfa", Reason: "bank statement shows it"})
	if err != nil || got.State != StateReconciled || !got.Reconciled.Happened {
		t.Fatalf("reconcile: %+v %v", got, err)
	}
	if j.count(journal.TypeApprovalReconciled) != 1 {
		t.Fatal("approval.reconciled not recorded")
	}
}

func TestReopenAsksAgain(t *testing.T) {
	s := New(kvStore(t), &memJournal{}, Config{})
	ctx := context.Background()
	r, _, _ := s.Request(ctx, hold(t, "r1", `{}`))
	if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
		t.Fatal(err)
	}
	got, err := s.Reopen(ctx, r.ID, policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"cfo"}, Assurance: "webauthn"}, "tightened")
	if err != nil || got.State != StateReopened || got.Decision != nil || len(got.Previous) != 1 {
		t.Fatalf("reopen: %+v %v", got, err)
	}
	if _, err := s.Decide(ctx, r.ID, reviewer); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("the old standing still approves: %v", err)
	}
	if _, err := s.Decide(ctx, r.ID, Decision{Approved: true, Approver: "carla", Roles: []string{"cfo"}, Assurance: "webauthn"}); err != nil {
		t.Fatal(err)
	}
}

func TestSignedAssertions(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	j := &memJournal{}
	s := New(kvStore(t), j, Config{Key: pub})
	ctx := context.Background()
	r, _, _ := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
	a := Assertion{Kind: "decision", ID: r.ID, ActionDigest: r.ActionDigest, Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa", Time: time.Now()}

	wrong, _ := a.Sign(other)
	if _, err := s.DecideSigned(ctx, wrong); !errors.Is(err, ErrBadAssertion) {
		t.Errorf("wrong key: %v", err)
	}
	changed := a
	changed.ActionDigest, _, _ = Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(`{"amount":"11"}`)}.Digest()
	sc, _ := changed.Sign(priv)
	if _, err := s.DecideSigned(ctx, sc); !errors.Is(err, ErrBadAssertion) {
		t.Errorf("changed action: %v", err)
	}
	tampered, _ := a.Sign(priv)
	tampered.Assertion.Approver = "mallory"
	if _, err := s.DecideSigned(ctx, tampered); !errors.Is(err, ErrBadAssertion) {
		t.Errorf("tampered: %v", err)
	}
	good, _ := a.Sign(priv)
	got, err := s.DecideSigned(ctx, good)
	if err != nil || got.State != StateApproved || got.Decision.Authenticated != "signed-assertion" {
		t.Fatalf("good assertion: %+v %v", got, err)
	}
	if s2 := New(kvStore(t), j, Config{}); true {
		if _, err := s2.DecideSigned(ctx, good); !errors.Is(err, ErrBadAssertion) {
			t.Errorf("no key configured: %v", err)
		}
	}
}

func TestWatchSeesChanges(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			s := New(st.open(t), &memJournal{}, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := s.Watch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r, _, _ := s.Request(ctx, hold(t, "r1", `{}`))
			if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
				t.Fatal(err)
			}
			for want := StateApproved; ; {
				select {
				case got := <-ch:
					if got.ID == r.ID && got.State == want {
						return
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no change seen")
				}
			}
		})
	}
}

func BenchmarkDecideClaim(b *testing.B) {
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := New(st.open(b), &memJournal{}, Config{})
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				r, _, err := s.Request(ctx, hold(b, "r1", fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Claim(ctx, r.ID, "e"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An assertion signed before a request was reopened cannot answer the new
// ask: it approved the action under the policy of its time.
func TestSignedAssertionBeforeReopenRefused(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s := New(kvStore(t), &memJournal{}, Config{Key: pub})
	ctx := context.Background()
	r, _, _ := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
	a := Assertion{Kind: "decision", ID: r.ID, ActionDigest: r.ActionDigest, Approved: true, Approver: "rita",
		Roles: []string{"finance"}, Assurance: "mfa", Time: time.Now()}
	old, _ := a.Sign(priv)
	if _, err := s.DecideSigned(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reopen(ctx, r.ID, policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "mfa"}, "tightened"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideSigned(ctx, old); !errors.Is(err, ErrBadAssertion) {
		t.Fatalf("the assertion from before the reopen approved again: %v", err)
	}
	a.Time = time.Now().Add(time.Second)
	fresh, _ := a.Sign(priv)
	if got, err := s.DecideSigned(ctx, fresh); err != nil || got.State != StateApproved {
		t.Fatalf("a new assertion after the reopen: %+v %v", got, err)
	}
}

// TestActionDigestRefusesKeysOneDecoderReadsAsOne: keys equal after case
// folding (at any depth, the Kelvin sign's "key" too) cannot be bound:
// encoding/json reads them as one field, the last one written, so their
// order would choose what runs under one digest. Keys that differ
// otherwise, and one key in another case alone, still bind.
func TestActionDigestRefusesKeysOneDecoderReadsAsOne(t *testing.T) {
	for _, p := range []string{
		`{"body":{"amount":"1"},"BODY":{"amount":"9"}}`,
		`{"key":"a","\u212aey":"b"}`,
		`{"files":{"x":{"Path":"a","path":"b"}}}`,
		`{"list":[{"to":"a"},{"to":"b","TO":"c"}]}`,
		`{"caf\u00e9":1,"cafe\u0301":2}`,
	} {
		if _, _, err := (Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(p)}).Digest(); !errors.Is(err, ErrBadAction) {
			t.Errorf("%s: %v, want ErrBadAction", p, err)
		}
	}
	for _, p := range []string{`{"BODY":{"amount":"1"}}`, `{"body":1,"bodies":2}`, `{"a":{"k":1},"b":{"K":2}}`} {
		if _, _, err := (Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(p)}).Digest(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestActionDigestBindsWhatWasResolved: what the sink resolved beyond the
// params is part of the binding; without it the digest is as before.
func TestActionDigestBindsWhatWasResolved(t *testing.T) {
	a := Action{Sink: "code", Action: "run", Run: "r1", Params: json.RawMessage(`{"integration":"tidy"}`)}
	b, c := a, a
	b.Resolved, c.Resolved = "sha256:aa", "sha256:bb"
	da, _, _ := a.Digest()
	db, _, _ := b.Digest()
	dc, _, _ := c.Digest()
	if da == db || db == dc {
		t.Errorf("the resolved source does not change the digest: %s %s %s", da, db, dc)
	}
	if da != "sha256:"+sha256Hex(`{"action":"run","params":{"integration":"tidy"},"run":"r1","sink":"code"}`) {
		t.Errorf("an action with nothing resolved changed its digest: %s", da)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestActionDigestRefusesNumbersADoubleBlurs: RFC 8785 writes numbers as
// doubles, so 12345678901234567000 and 12345678901234567890 would share a
// digest while a provider reading big integers exactly pays another
// reference; such params cannot be bound (MCP found it; it holds for
// every sink). Numbers a double keeps exactly, however spelled, bind.
func TestActionDigestRefusesNumbersADoubleBlurs(t *testing.T) {
	for _, p := range []string{
		`{"ref":12345678901234567890}`,
		`{"body":{"amount":0.1000000000000000000001}}`,
		`{"list":[1,2,9007199254740993]}`,
		`{"huge":1e400}`,
	} {
		if _, _, err := (Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(p)}).Digest(); !errors.Is(err, ErrBadAction) {
			t.Errorf("%s: %v, want ErrBadAction", p, err)
		}
	}
	same := func(a, b string) {
		t.Helper()
		da, _, err := (Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(a)}).Digest()
		db, _, err2 := (Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(b)}).Digest()
		if err != nil || err2 != nil || da != db {
			t.Errorf("%s and %s: %s %v, %s %v", a, b, da, err, db, err2)
		}
	}
	same(`{"amount":10.50}`, `{"amount":10.5}`)
	same(`{"n":1e2}`, `{"n":100}`)
	same(`{"x":0.1}`, `{"x":0.10}`)
	same(`{"big":9007199254740992}`, `{"big":9007199254740992.0}`)
}
