package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/memory"
)

// The quota flags: defaults, MiB, the environment, and an out-of-range
// value (0 included: the sinks would take it for the default) refused
// before serve starts anything.
func TestQuotaFlags(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*serveConfig, error) {
		var c serveConfig
		var out bytes.Buffer
		fs := serveFlags(&cliEnv{getenv: func(k string) string { return env[k] }, stdout: &out, stderr: &out}, &c)
		if _, err := fs.parse(args); err != nil {
			return nil, err
		}
		return &c, nil
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if mem, art, err := c.quotas.bytes(); err != nil || mem != memory.DefaultQuotaBytes || art != artifact.DefaultQuotaBytes {
		t.Fatalf("defaults %d %d %v", mem, art, err)
	}
	c, err = parse(map[string]string{"GATEHOUSE_MEMORY_QUOTA_MB": "3"}, "--artifact-quota-mb", "5")
	if err != nil {
		t.Fatal(err)
	}
	if mem, art, err := c.quotas.bytes(); err != nil || mem != 3<<20 || art != 5<<20 {
		t.Fatalf("set %d %d %v", mem, art, err)
	}
	for _, args := range [][]string{{"--memory-quota-mb", "-1"}, {"--artifact-quota-mb", "-5"}, {"--memory-quota-mb", "0"}, {"--artifact-quota-mb", "0"}} {
		c, err := parse(nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		err = c.validate(&cliEnv{getenv: func(string) string { return "" }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), args[0]+" must be 1 to") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
