package review_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/review"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
	"github.com/gatehouse/gatehouse/policy"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestReviewGroupsWhatStrictWouldRefuse(t *testing.T) {
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	rep, err := review.Review(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 4 || rep.Decisions != 8 || rep.Would != 6 || rep.Skipped != 0 {
		t.Fatalf("counts: %+v", rep)
	}
	got := map[string]review.Finding{}
	for _, f := range rep.Findings {
		got[string(f.Refusal)+" "+f.Target] = f
	}
	stripe, ok := got["mutation-without-atom stripe POST api.stripe.com/v1/refunds"]
	if !ok {
		t.Fatalf("no stripe group in %v", rep.Findings)
	}
	if stripe.Count != 3 || len(stripe.Examples) != 2 || !stripe.First.Equal(reviewtest.Start.Add(2*60e9)) {
		t.Errorf("stripe group: %+v", stripe)
	}
	if rep.Findings[0].Target != stripe.Target {
		t.Errorf("most frequent first: %v", rep.Findings[0])
	}
	if _, ok := got["scope-missing stripe POST api.stripe.com/v1/payouts"]; ok {
		t.Errorf("an enforced refusal is not a review finding")
	}
	for _, want := range []string{"unconfined-execution run python3", "browser-send-off-site send POST forms.example.net/submit", "agent-unregistered deliver report"} {
		if _, ok := got[want]; !ok {
			t.Errorf("missing group %q", want)
		}
	}
}

// Every suggested rule text loads with policy.Parse and, over the effect
// the journal recorded, makes strict mode allow it (hold, for approvals).
func TestSuggestedRulesLoadAndAllow(t *testing.T) {
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	rep, err := review.Review(dir)
	if err != nil {
		t.Fatal(err)
	}
	effects := map[policy.Refusal]policy.Effect{
		policy.RefuseMutationWithoutAtom: {Sink: policy.SinkProvider, Action: "call", Origin: policy.OriginShipped, Provider: "stripe", Method: "POST", Host: "api.stripe.com", Path: "/v1/refunds"},
		policy.RefuseUnconfinedExecution: {Sink: policy.SinkCode, Action: "run", Origin: policy.OriginModel, Target: "python3"},
		policy.RefuseBrowserSendOffSite:  {Sink: policy.SinkBrowser, Action: "send", Method: "POST", Host: "forms.example.net", Path: "/submit", PageHost: "shop.example.com", Target: "forms.example.net/submit"},
		policy.RefuseAgentUnregistered:   {Sink: policy.SinkOutput, Action: "deliver", Target: "report"},
	}
	withRules := 0
	for _, f := range rep.Findings {
		e, ok := effects[f.Refusal]
		if !ok {
			t.Fatalf("unexpected finding %v", f.Refusal)
		}
		// Without a rule strict mode refuses it.
		if d := policy.Default().Decide(policy.Input{Mode: policy.ModeStrict, Effect: e, Authority: policy.Authority{Agent: f.Agent}}); d.Verdict == policy.VerdictAllow {
			t.Fatalf("%s: allowed without a rule", f.Refusal)
		}
		for _, s := range f.Suggestions {
			if s.Rules == "" {
				continue
			}
			withRules++
			if !s.Checked {
				t.Errorf("%s: unchecked suggestion shown: %+v", f.Refusal, s)
			}
			text := s.Rules
			if f.Agent != "" && !strings.Contains(text, "agents:") {
				text += "agents:\n  - name: " + f.Agent + "\n" // the agent's existing card
			}
			p, err := policy.Parse("suggested.yaml", []byte(text))
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", f.Refusal, s.Kind, err, s.Rules)
			}
			auth := policy.Authority{Agent: f.Agent}
			if s.Kind == review.KindScope {
				auth.Scopes = []string{"stripe.write"}
			}
			want := policy.VerdictAllow
			if s.Kind == review.KindApproval {
				want = policy.VerdictHold
			}
			if d := p.Decide(policy.Input{Mode: policy.ModeStrict, Effect: e, Authority: auth}); d.Verdict != want {
				t.Errorf("%s %s: strict gives %v %v, want %v\n%s", f.Refusal, s.Kind, d.Verdict, d.Reasons, want, s.Rules)
			}
			if s.Kind == review.KindScope {
				if d := p.Decide(policy.Input{Mode: policy.ModeStrict, Effect: e}); d.Verdict != policy.VerdictRefuse || d.Refusal != policy.RefuseScopeMissing {
					t.Errorf("scope suggestion lets in a person without the scope: %v", d.Reasons)
				}
			}
		}
	}
	if withRules < 5 {
		t.Errorf("only %d suggestions carry rule text", withRules)
	}
}

func TestReviewGolden(t *testing.T) {
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	rep, err := review.Review(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep.Journal = "JOURNAL"
	got, _ := json.MarshalIndent(rep, "", "  ")
	got = append(got, '\n')
	path := filepath.Join("testdata", "review.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./broker/review -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("review.json differs (rerun with -update if intended):\n%s", got)
	}
}

func TestNotAJournal(t *testing.T) {
	if _, err := review.Review(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, review.ErrNoJournal) {
		t.Fatalf("err %v", err)
	}
}
