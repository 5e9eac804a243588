package dashboard

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./dashboard -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file; rerun with -update if the change is intended\n got: %s", name, got)
	}
}

func TestStatusPageGolden(t *testing.T) {
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for name, st := range map[string]Status{
		"status.html": {
			Version: "0.1.0", Mode: "strict", PolicyName: "rules.yaml", PolicyDigest: "sha256:ab12",
			NATSURL: "nats://127.0.0.1:4222", Embedded: true, CredsDir: "/data/nats/creds", JournalDir: "/data/journal",
			Sinks: []string{"output", "peer"}, Started: start, Now: start.Add(90 * time.Second),
			WriterRunning: true, EventsWritten: 12, Pending: 1, SandboxTier: "bubblewrap", SandboxConfined: true,
		},
		"status-policy-error.html": {
			Version: "0.1.0", Mode: "report", PolicyName: "bad.yaml", PolicyError: `bad.yaml: rule 2 "x": unknown key "colour" <script>`,
			NATSURL: "nats://cluster:4222", JournalDir: "/data/journal", Started: start, Now: start, SandboxTier: "unconfined",
		},
		"status-grounding-error.html": {
			Version: "0.1.0", Mode: "strict", PolicyName: "rules.yaml", PolicyDigest: "sha256:ab12",
			GroundingError: `grounding rules: /etc/gatehouse/grounding.yaml: line 3: rule "refund": unknown key "bnd" <b>`,
			NATSURL:        "nats://cluster:4222", JournalDir: "/data/journal", Sinks: []string{"provider"}, Started: start, Now: start, SandboxTier: "unconfined",
		},
	} {
		var buf bytes.Buffer
		if err := StatusPage(st).Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		golden(t, name, buf.Bytes())
	}
}
