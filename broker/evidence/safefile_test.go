package evidence_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// verify --export on an export whose head log, run file, manifest or
// proofs checkpoint is a named pipe or a link to /dev/zero answers with a
// finding or an error, at once: it never waits on the pipe or reads
// /dev/zero for ever.
func TestVerifyExportRefusesNonRegularFiles(t *testing.T) {
	env, runs := twoTenants(t)
	for _, file := range []string{"head.jsonl", "runs/" + runs["acme/ada"] + ".jsonl", journal.ExportManifestFile} {
		for _, kind := range []string{"fifo", "dev-zero"} {
			t.Run(file+"/"+kind, func(t *testing.T) {
				dst := filepath.Join(t.TempDir(), "acme-evidence")
				if _, err := evidence.Export(dst, env.JournalDir, evidence.Selector{Tenant: "acme"}); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dst, filepath.FromSlash(file))
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				var err error
				if kind == "fifo" {
					err = syscall.Mkfifo(path, 0o600)
				} else {
					err = os.Symlink("/dev/zero", path)
				}
				if err != nil {
					t.Fatal(err)
				}
				rep, err := evidence.VerifyExport(dst)
				if err == nil && rep.OK {
					t.Fatalf("verify --export passed with %s a %s", file, kind)
				}
			})
		}
	}
}
