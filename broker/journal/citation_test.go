package journal

import (
	"testing"
)

// TestVerifyChecksCitations: a grounded decision in run b cites the
// outcome of a read in run a; verify accepts a citation whose digest the
// cited outcome has, and names every citation that points nowhere or at
// other content.
func TestVerifyChecksCitations(t *testing.T) {
	const a, b = "r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	grounded := func(cites ...Citation) Decision {
		d := decision(OutcomeAllowed)
		d.Citations = cites
		return d
	}
	good := Citation{Run: a, Effect: "x_read", Digest: "sha256:ab", Path: "erp:/suppliers/S-1"}
	for name, tc := range map[string]struct {
		cite Citation
		ok   bool
	}{
		"cited record present": {good, true},
		"other content":        {Citation{Run: a, Effect: "x_read", Digest: "sha256:ff", Path: good.Path}, false},
		"no such effect":       {Citation{Run: a, Effect: "x_none", Digest: "sha256:ab", Path: good.Path}, false},
		"no such run":          {Citation{Run: "r_cccccccccccccccccccccccccc", Effect: "x_read", Digest: "sha256:ab"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeJournal(t, dir, []Event{
				ev(t, a, "e_a1", TypeRunOpen, "", 1, RunOpen{}),
				ev(t, a, "e_a2", TypeDecision, "x_read", 2, decision(OutcomeAllowed)),
				ev(t, a, "e_a3", TypeAttempt, "x_read", 3, Attempt{Sink: "provider", Action: "call"}),
				ev(t, a, "e_a4", TypeOutcome, "x_read", 4, Result{Status: "ok", Size: 2, Digest: "sha256:ab"}),
				ev(t, b, "e_b1", TypeRunOpen, "", 5, RunOpen{}),
				ev(t, b, "e_b2", TypeDecision, "x_pay", 6, grounded(tc.cite)),
			}, 3)
			rep := verify(t, dir)
			if rep.OK != tc.ok {
				t.Fatalf("ok = %v: %s", rep.OK, dump(rep))
			}
			if !tc.ok && (len(rep.Findings) != 1 || rep.Findings[0].Kind != FindingBadCitation || rep.Findings[0].Run != b || rep.Findings[0].Seq != 2) {
				t.Fatalf("findings: %s", dump(rep))
			}
		})
	}
}
