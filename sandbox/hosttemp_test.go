package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sandbox"
)

// TestRunHostOwnTemp: two host commands that hold the same uid one after
// the other (here every run has sharedUID) share nothing through the host's
// temporary folders or System V IPC: what the first leaves in /tmp,
// /var/tmp and /dev/shm is removed when it ends, so the second finds
// nothing, and its shared memory went with its IPC namespace.
func TestRunHostLeavesNothingInTemp(t *testing.T) {
	cfg := testConfig(sandbox.TierUnconfined)
	cfg.UID, cfg.UIDs = sharedUID, 1
	sb, rep := sandbox.Detect(context.Background(), cfg)
	if !rep.Host.OwnPID || !sb.SeparateUID() {
		t.Fatalf("host commands need a uid and namespaces of their own here: %+v", rep.Host)
	}
	mark := "gatehouse-own-temp-" + nonce()
	run := func(script string) string {
		t.Helper()
		res, err := sb.RunHost(context.Background(), sandbox.Spec{Argv: []string{"/bin/sh", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Stdout) + string(res.Stderr)
	}
	first := run(fmt.Sprintf(`for d in /tmp /var/tmp /dev/shm; do echo left > $d/%[1]s && chmod 644 $d/%[1]s && echo wrote; done
ipcmk -M 4096 -p 0644 >/dev/null && echo shm; echo here > in-ws && cat "$PWD/in-ws"`, mark))
	if strings.Count(first, "wrote") != 3 || !strings.Contains(first, "shm") || !strings.Contains(first, "here") {
		t.Fatalf("the first run: %s", first)
	}
	second := run(fmt.Sprintf(`cat /tmp/%[1]s /var/tmp/%[1]s /dev/shm/%[1]s 2>/dev/null; echo segments=$(ipcs -m -c | grep -c %[2]d)`, mark, sharedUID))
	if strings.Contains(second, "left") || !strings.Contains(second, "segments=0") {
		t.Fatalf("the second run, as the same uid, found the first one's: %s", second)
	}
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if _, err := os.Stat(filepath.Join(d, mark)); !os.IsNotExist(err) {
			_ = os.Remove(filepath.Join(d, mark))
			t.Errorf("a host command's file is on the host in %s", d)
		}
	}
}
