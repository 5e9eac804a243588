package main

import (
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/memory"
)

// quotaFlags set each tenant's budget of stored bytes in the shared
// stores agents fill: memories and artifacts (the sinks' package docs say
// how it is kept and why the defaults).
type quotaFlags struct {
	memoryMB, artifactMB int
	registered           bool // by register: a 0 was given, not defaulted
}

func (f *quotaFlags) register(fs *flagSet) {
	f.registered = true
	fs.intVar(&f.memoryMB, "memory-quota-mb", memory.DefaultQuotaBytes>>20, "each tenant's budget of memories in MiB, private and shared together; a put past it is refused (QUOTA_EXCEEDED) and nothing is stored")
	fs.intVar(&f.artifactMB, "artifact-quota-mb", artifact.DefaultQuotaBytes>>20, "each tenant's budget of artifacts in MiB, browser screenshots included; a publish past it is refused (QUOTA_EXCEEDED) and nothing is stored")
}

// bytes returns the budgets, or an error naming the flag out of range. A
// zero is the default only in a serveConfig made without its flags; given
// on the command line it is refused, as the message says (the sinks would
// take it for the default, which is neither "nothing" nor "unlimited").
func (f *quotaFlags) bytes() (mem, art int64, err error) {
	least := 0
	if f.registered {
		least = 1
	}
	switch {
	case f.memoryMB < least || f.memoryMB > 1<<30:
		return 0, 0, usageError("--memory-quota-mb must be 1 to %d", 1<<30)
	case f.artifactMB < least || f.artifactMB > 1<<30:
		return 0, 0, usageError("--artifact-quota-mb must be 1 to %d", 1<<30)
	}
	return int64(f.memoryMB) << 20, int64(f.artifactMB) << 20, nil
}
