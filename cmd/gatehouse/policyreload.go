package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
)

// policyHolder is serve's policy: what the broker decides under and what
// the status page shows. reload re-reads the file (on SIGHUP and from the
// dashboard's "Reload policy") and fails closed exactly as serve does at
// start: a file that cannot be read puts policy.Unreadable in place, which
// refuses every effect with policy-unreadable until a reload succeeds.
// Decisions already carry the policy digest they were made under, so a
// reload adds no journal event of its own. Safe for concurrent use.
type policyHolder struct {
	path    string
	log     *slog.Logger
	broker  *broker.Broker     // set before the first reload
	capture broker.ContentSink // keeps the new source for replay; may be nil

	mu  sync.Mutex // serializes reloads and guards pol and err
	pol *policy.Policy
	err error
}

// current is the policy in force and the error of the last read.
func (h *policyHolder) current() (*policy.Policy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pol, h.err
}

// reload re-reads the policy file, puts it in force and returns the read
// error, if any.
func (h *policyHolder) reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	pol, err := loadPolicy(h.path)
	h.broker.SetPolicy(pol)
	h.pol, h.err = pol, err
	if err != nil {
		h.log.Error("policy could not be read: every effect is refused until it is fixed", "file", h.path, "err", err)
		return err
	}
	h.log.Info("policy reloaded", "file", policyName(h.path), "digest", pol.Digest())
	h.keepSource(pol)
	return nil
}

// keepSource stores the file's source in the content store, so replay can
// load the new policy by its digest (as openContent does at start).
func (h *policyHolder) keepSource(pol *policy.Policy) {
	cp, ok := h.capture.(*content.Capturer)
	if !ok || h.path == "" || cp.Mode() != content.ModeFull {
		return
	}
	src, err := os.ReadFile(h.path)
	if err != nil || content.DigestOf(src) != pol.Digest() {
		h.log.Warn("policy source not kept: replay cannot load it", "file", h.path)
		return
	}
	if _, err := cp.AddPolicy(filepath.Base(h.path), src); err != nil {
		h.log.Warn("policy source not kept: replay cannot load it", "file", h.path, "err", err)
	}
}

// reloadOnHangup reloads the policy on every SIGHUP until ctx ends; the
// returned func stops it and waits.
func (h *policyHolder) reloadOnHangup(ctx context.Context) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				h.log.Info("SIGHUP: reloading the policy", "file", policyName(h.path))
				_ = h.reload()
			}
		}
	}()
	return func() { signal.Stop(ch); cancel(); <-done }
}
