package content

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// A run file with a line longer than the writer ever writes stops the
// scan with an error, not silently: erasure must not miss the rest.
func TestScanRunReportsAnOverlongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r_x.jsonl")
	long := bytes.Repeat([]byte("a"), journal.MaxLineBytes+2)
	if err := os.WriteFile(path, append(long, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := scanRun(path, func(journal.Event) {}); err == nil {
		t.Fatal("an over-long line was skipped without an error")
	}
}
