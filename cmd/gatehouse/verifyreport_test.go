package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
)

func unsigned(run string, seqs ...uint64) []journal.Finding {
	var out []journal.Finding
	for _, s := range seqs {
		out = append(out, journal.Finding{Kind: journal.FindingUnsignedEvent, Run: run, Seq: s, Line: int(s), Detail: "not signed"})
	}
	return out
}

// --require-signatures on an unsigned journal is one finding, on a partly
// signed one a finding per run: never one per event.
func TestCollapseUnsigned(t *testing.T) {
	rep := &journal.Report{Events: 5, Findings: append(unsigned("r_a", 1, 2, 3), unsigned("r_b", 1, 2)...)}
	collapseUnsigned(rep)
	if len(rep.Findings) != 1 || rep.OK || !strings.Contains(rep.Findings[0].Detail, "none of the journal's 5 events is signed") {
		t.Fatalf("unsigned journal: %+v", rep.Findings)
	}
	other := journal.Finding{Kind: journal.FindingEditedEvent, Run: "r_a", Seq: 4, Detail: "edited"}
	rep = &journal.Report{Events: 9, Signed: 4, Findings: append(append(unsigned("r_a", 1, 2, 3), other), unsigned("r_b", 5)...)}
	collapseUnsigned(rep)
	if len(rep.Findings) != 3 || rep.Findings[0] != other || rep.Findings[1].Detail != "3 events are not signed (events 1 to 3)" ||
		rep.Findings[2].Run != "r_b" || rep.Findings[2].Seq != 5 {
		t.Fatalf("partly signed: %+v", rep.Findings)
	}
}

// A head log that could not be read is not said to be checked.
func TestDescribeUnreadableHeadLog(t *testing.T) {
	sc := &verifyScope{}
	checked, notChecked := sc.describe(&journal.Report{Events: 3, Runs: 1, Findings: []journal.Finding{{Kind: journal.FindingHeadLogMissing}}})
	if strings.Contains(strings.Join(checked, "\n"), "head log") || !strings.Contains(strings.Join(notChecked, "\n"), "the head log's chain") {
		t.Fatalf("checked %q, not checked %q", checked, notChecked)
	}
	checked, _ = sc.describe(&journal.Report{Events: 3, Runs: 1, HeadEntries: 2})
	if !strings.Contains(strings.Join(checked, "\n"), "the head log's chain (2 entries)") {
		t.Fatalf("checked %q", checked)
	}
}

// With --trusted-key, what was checked names the keys the signatures were
// checked against, and does not read as though every event were signed
// under one of them (an untrusted signer is a finding, reported apart).
func TestDescribeSignaturesCheckedAgainstKeys(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := journal.NewTrustedKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	checked, _ := (&verifyScope{keys: keys}).describe(&journal.Report{Events: 5, Signed: 5, Runs: 1})
	want := "signatures: 5 of 5 events signed, each checked against the 1 trusted key(s)"
	if !slices.Contains(checked, want) {
		t.Fatalf("checked %q, want %q", checked, want)
	}
}
