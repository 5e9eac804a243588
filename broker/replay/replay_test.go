package replay_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/content/contenttest"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/replay"
	"github.com/gatehouse/gatehouse/policy"
)

// decisions reads the policy.decision events of a run.
func decisions(t *testing.T, env *contenttest.Env, run string) []journal.Decision {
	t.Helper()
	env.Drain(t)
	b, err := os.ReadFile(filepath.Join(env.JournalDir, "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.Decision
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		ev, err := journal.ParseLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == journal.TypeDecision {
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// someEffects makes a run with an allowed and a refused output and
// returns it.
func someEffects(t *testing.T, env *contenttest.Env, tenant, person string) string {
	t.Helper()
	run := env.Open(t, tenant, person, "reports")
	env.Output(t, run, "ok", map[string]int{"rows": 3})
	env.Output(t, run, "leak-everything", "secret-payload-"+person)
	env.Close(t, run)
	return run
}

func TestCaptureModes(t *testing.T) {
	for _, mode := range []content.Mode{content.ModeFull, content.ModeDigests, content.ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			env := contenttest.Start(t, policy.ModeStrict, mode, contenttest.Rules, nil)
			run := someEffects(t, env, "acme", "ada")
			env.Verify(t)
			ds := decisions(t, env, run)
			if len(ds) != 2 {
				t.Fatalf("%d decisions", len(ds))
			}
			for _, d := range ds {
				switch mode {
				case content.ModeOff:
					if d.RequestDigest != "" {
						t.Fatalf("off recorded a digest %q", d.RequestDigest)
					}
				default:
					if !content.ValidDigest(d.RequestDigest) {
						t.Fatalf("%s recorded digest %q", mode, d.RequestDigest)
					}
					b, err := env.Store.Get(d.RequestDigest)
					if mode == content.ModeDigests {
						if err == nil {
							t.Fatalf("digests mode kept content")
						}
						continue
					}
					if err != nil {
						t.Fatalf("full mode did not keep the request: %v", err)
					}
					req, err := content.DecodeRequest(b)
					if err != nil || req.Run != run || req.Described.Sink != policy.SinkOutput {
						t.Fatalf("request = %+v, %v", req, err)
					}
				}
			}
			// The content never reaches the journal, whatever the mode.
			filepath.Walk(env.JournalDir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					if b, _ := os.ReadFile(p); strings.Contains(string(b), "secret-payload") {
						t.Fatalf("%s holds content", p)
					}
				}
				return nil
			})
			rep, err := replay.All(env.JournalDir, replay.Options{Content: env.Store})
			if err != nil {
				t.Fatal(err)
			}
			want := replay.StatusReproduced
			if mode != content.ModeFull {
				want = replay.StatusNotReplayable
			}
			if rep.Runs[0].Status != want {
				t.Fatalf("replay: %s, want %s", rep.Runs[0], want)
			}
		})
	}
}

func TestReplayReproducesAndWhatIfDiverges(t *testing.T) {
	env := contenttest.Start(t, policy.ModeReport, content.ModeFull, contenttest.Rules, nil)
	run := someEffects(t, env, "acme", "ada")
	run2 := someEffects(t, env, "acme", "bob")
	env.Verify(t)

	rep, err := replay.All(env.JournalDir, replay.Options{Content: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Runs) != 2 {
		t.Fatalf("replay = %+v", rep)
	}
	for _, r := range rep.Runs {
		if r.Status != replay.StatusReproduced || r.Identical != 2 || r.String() != r.Run+": reproduced (2 decision(s) identical)" {
			t.Fatalf("run %s", r)
		}
	}

	// A candidate that also denies "ok" outputs: what would change, by rule.
	cand, err := policy.Parse("candidate.yaml", []byte(contenttest.Rules+`
  - name: no-ok
    decision: deny
    match: {sink: output, target: "ok"}
`))
	if err != nil {
		t.Fatal(err)
	}
	what, err := replay.All(env.JournalDir, replay.Options{Content: env.Store, Policy: cand})
	if err != nil {
		t.Fatal(err)
	}
	if what.OK || len(what.Groups) != 1 || what.Groups[0].Rule != "no-ok" || len(what.Groups[0].Decisions) != 2 || len(what.Groups[0].Runs) != 2 {
		t.Fatalf("what-if groups = %+v", what.Groups)
	}
	d := what.Groups[0].Decisions[0]
	if d.Recorded.Rule != "" || d.Replayed.Rule != "no-ok" || d.Target != "ok" {
		t.Fatalf("what-if decision = %+v", d)
	}
	// The same runs, in strict mode: the leak would be refused, enforced.
	strict, err := replay.Runs(env.JournalDir, []string{run}, replay.Options{Content: env.Store, Mode: policy.ModeStrict})
	if err != nil {
		t.Fatal(err)
	}
	if strict.Runs[0].Status != replay.StatusDiverged || !strict.Runs[0].Divergences[0].Replayed.Enforced {
		t.Fatalf("strict what-if = %s", strict.Runs[0])
	}
	_ = run2
}

func TestChangedPolicyOrContentDivergesAndSaysWhere(t *testing.T) {
	env := contenttest.Start(t, policy.ModeStrict, content.ModeFull, contenttest.Rules, nil)
	run := someEffects(t, env, "acme", "ada")
	env.Verify(t)
	ds := decisions(t, env, run)

	// The recorded policy's source edited in the store: changed.
	restore := contenttest.EditBlob(t, env.ContentDir, ds[0].PolicyDigest, "leak*", "none*")
	r, err := replay.Run(env.JournalDir, run, replay.Options{Content: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != replay.StatusChanged || !strings.Contains(r.String(), "policy does not match its digest") || r.Divergences[0].Seq != 2 {
		t.Fatalf("edited policy: %s", r)
	}
	restore()

	// The refused request's content edited: changed, at that event.
	contenttest.EditBlob(t, env.ContentDir, ds[1].RequestDigest, "leak-everything", "okay-everything")
	r, err = replay.Run(env.JournalDir, run, replay.Options{Content: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != replay.StatusChanged || r.Identical != 1 || !strings.Contains(r.String(), "changed at event 5") {
		t.Fatalf("edited request: %s", r)
	}
}

func TestErasureKeepsVerifyAndStopsReplay(t *testing.T) {
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	env := contenttest.Start(t, policy.ModeStrict, content.ModeFull, contenttest.Rules, c.now)
	ada := someEffects(t, env, "acme", "ada")
	bob := someEffects(t, env, "acme", "bob")
	env.Verify(t)

	es, err := env.Store.ErasePerson(policy.Principal{Tenant: "acme", Person: "ada"}, env.JournalDir)
	if err != nil || len(es) != 2 {
		t.Fatalf("erased %+v, %v", es, err)
	}
	env.Verify(t) // erasure never touches the journal
	rep, err := replay.All(env.JournalDir, replay.Options{Content: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		switch r.Run {
		case ada:
			if r.Status != replay.StatusNotReplayable || !strings.Contains(r.String(), "erased (person acme/ada") {
				t.Fatalf("ada's run: %s", r)
			}
		case bob:
			if r.Status != replay.StatusReproduced {
				t.Fatalf("bob's run: %s", r)
			}
		}
	}

	// Retention: 31 days later everything unused is erased, the policy too.
	c.t = c.t.Add(31 * 24 * time.Hour)
	if _, err := env.Store.EraseUnused(30 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	env.Verify(t)
	r, err := replay.Run(env.JournalDir, bob, replay.Options{Content: env.Store})
	if err != nil || r.Status != replay.StatusNotReplayable || !strings.Contains(r.String(), "unused for 30 days") {
		t.Fatalf("bob after retention: %s %v", r, err)
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// A decision made while the policy file could not be read (a reload of a
// broken file) refused with policy-unreadable, its reason naming the file
// and the read error of that moment; replay reproduces it (the recorded
// reason is that moment's fact, not something the policy decides).
func TestUnreadablePolicyDecisionReproduces(t *testing.T) {
	env := contenttest.Start(t, policy.ModeReport, content.ModeFull, contenttest.Rules, nil)
	run := env.Open(t, "acme", "ada", "reports")
	env.Output(t, run, "ok", 1)
	env.Broker.SetPolicy(policy.Unreadable("/etc/gatehouse/rules.yaml", os.ErrPermission))
	env.Output(t, run, "ok", 2)
	env.Close(t, run)
	env.Verify(t)
	ds := decisions(t, env, run)
	if len(ds) != 2 || ds[1].Refusal != policy.RefusePolicyUnreadable || ds[1].PolicyDigest != "" {
		t.Fatalf("decisions = %+v", ds)
	}
	r, err := replay.Run(env.JournalDir, run, replay.Options{Content: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != replay.StatusReproduced || r.Identical != 2 {
		t.Fatalf("replay of a decision under an unreadable policy: %s", r)
	}
}
