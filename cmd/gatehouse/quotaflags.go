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
}

func (f *quotaFlags) register(fs *flagSet) {
	fs.intVar(&f.memoryMB, "memory-quota-mb", memory.DefaultQuotaBytes>>20, "each tenant's budget of memories in MiB, private and shared together; a put past it is refused (QUOTA_EXCEEDED) and nothing is stored")
	fs.intVar(&f.artifactMB, "artifact-quota-mb", artifact.DefaultQuotaBytes>>20, "each tenant's budget of artifacts in MiB, browser screenshots included; a publish past it is refused (QUOTA_EXCEEDED) and nothing is stored")
}

// bytes returns the budgets, or an error naming the flag out of range. A
// zero (a serveConfig made without its flags) is the default.
func (f *quotaFlags) bytes() (mem, art int64, err error) {
	switch {
	case f.memoryMB < 0 || f.memoryMB > 1<<30:
		return 0, 0, usageError("--memory-quota-mb must be 1 to %d", 1<<30)
	case f.artifactMB < 0 || f.artifactMB > 1<<30:
		return 0, 0, usageError("--artifact-quota-mb must be 1 to %d", 1<<30)
	}
	return int64(f.memoryMB) << 20, int64(f.artifactMB) << 20, nil
}
