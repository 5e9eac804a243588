package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// policyHolder is serve's policy: what the broker decides under and what
// the status page shows. reload re-reads the file (on SIGHUP and from the
// dashboard's "Reload policy") and fails closed exactly as serve does at
// start: a file that cannot be read puts policy.Unreadable in place, which
// refuses every effect with policy-unreadable until a reload succeeds.
// Decisions already carry the policy digest they were made under, so a
// reload adds no journal event of its own. With --grounding it re-reads
// the grounding rules too and puts them in the provider sink, failing
// closed the same way (grounding.Unreadable refuses every provider call);
// decisions carry the rules' digest, and the source is kept for replay.
// Safe for concurrent use.
type policyHolder struct {
	path    string
	log     *slog.Logger
	broker  *broker.Broker     // set before the first reload
	capture broker.ContentSink // keeps the new source for replay; may be nil

	groundingPath string         // --grounding; "" reloads no grounding rules
	provider      *provider.Sink // whose rules to replace; nil without --providers

	mu  sync.Mutex // serializes reloads and guards pol, err and groundErr
	pol *policy.Policy
	err error
	// groundErr is why the grounding rules in force are
	// grounding.Unreadable (set at start from serve's read, then by every
	// reload); nil when they are readable or there are none.
	groundErr error
}

// groundingError is why the grounding rules in force refuse every
// provider call, or nil.
func (h *policyHolder) groundingError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.groundErr
}

// current is the policy in force and the error of the last read.
func (h *policyHolder) current() (*policy.Policy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pol, h.err
}

// reload re-reads the policy file and the grounding rules file, puts
// them in force and returns the read errors, if any.
func (h *policyHolder) reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return errors.Join(h.reloadPolicy(), h.reloadGrounding())
}

func (h *policyHolder) reloadPolicy() error {
	pol, err := loadPolicy(h.path)
	h.broker.SetPolicy(pol)
	h.pol, h.err = pol, err
	if err != nil {
		h.log.Error("policy could not be read: every effect is refused until it is fixed", "file", h.path, "err", err)
		return err
	}
	h.log.Info("policy reloaded", "file", policyName(h.path), "digest", pol.Digest())
	keepPolicySource(h.capture, h.path, pol, h.log)
	return nil
}

// reloadGrounding re-reads --grounding into the provider sink. A file that
// cannot be read puts grounding.Unreadable in force, as serve does at
// start: every provider call is refused until a reload succeeds.
func (h *policyHolder) reloadGrounding() error {
	if h.groundingPath == "" || h.provider == nil {
		return nil
	}
	rules, err := loadGrounding(h.groundingPath, h.provider.GroundingCatalogue())
	if err != nil {
		h.log.Error("grounding rules could not be read: every provider call is refused until they are fixed", "file", h.groundingPath, "err", err)
		rules = grounding.Unreadable(h.groundingPath, err)
	}
	if serr := h.provider.SetGrounding(rules); serr != nil {
		h.log.Error("grounding rules not reloaded", "file", h.groundingPath, "err", serr)
		return errors.Join(err, serr)
	}
	if err != nil {
		err = fmt.Errorf("grounding rules: %w", err)
	}
	h.groundErr = err // as serve's read at start words it
	if err != nil {
		return err
	}
	h.log.Info("grounding rules reloaded", "file", filepath.Base(h.groundingPath), "digest", rules.Digest())
	keepGroundingSource(h.capture, h.groundingPath, rules, h.log)
	return nil
}

// keepPolicySource keeps the source of the policy file at path in the
// content store when capture is full, so replay can load pol by its
// digest; a file changed since pol was read is not kept. serve calls it
// at start (openContent) and after every reload.
func keepPolicySource(capture broker.ContentSink, path string, pol *policy.Policy, log *slog.Logger) {
	cp, ok := capture.(*content.Capturer)
	if !ok || path == "" || pol.Digest() == "" || cp.Mode() != content.ModeFull {
		return
	}
	src, err := os.ReadFile(path)
	switch {
	case err != nil:
		log.Warn("policy source not kept: replay cannot load it", "file", path, "err", err)
	case content.DigestOf(src) != pol.Digest():
		log.Warn("policy file changed since it was loaded; its source is not kept, replay cannot load it", "file", path)
	default:
		if _, err := cp.AddPolicy(filepath.Base(path), src); err != nil {
			log.Warn("policy source not kept: replay cannot load it", "file", path, "err", err)
		}
	}
}

// keepGroundingSource is keepPolicySource for the grounding rules file at
// path, read as rules (nothing is kept for unreadable rules).
func keepGroundingSource(capture broker.ContentSink, path string, rules *grounding.Rules, log *slog.Logger) {
	cp, ok := capture.(*content.Capturer)
	if !ok || path == "" || rules.Digest() == "" || cp.Mode() != content.ModeFull {
		return
	}
	src, err := os.ReadFile(path)
	switch {
	case err != nil:
		log.Warn("grounding rules source not kept: replay cannot check grounding", "file", path, "err", err)
	case content.DigestOf(src) != rules.Digest():
		log.Warn("grounding rules file changed since it was loaded; its source is not kept, replay cannot check grounding", "file", path)
	default:
		if _, err := cp.AddGrounding(filepath.Base(path), src); err != nil {
			log.Warn("grounding rules source not kept: replay cannot check grounding", "file", path, "err", err)
		}
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
				h.log.Info("SIGHUP: reloading the policy and grounding rules", "file", policyName(h.path), "grounding", h.groundingPath)
				_ = h.reload()
			}
		}
	}()
	return func() { signal.Stop(ch); cancel(); <-done }
}

// providerOf is the provider sink among sinks, nil when serve runs none.
func providerOf(sinks []broker.Sink) *provider.Sink {
	for _, s := range sinks {
		if p, ok := s.(*provider.Sink); ok {
			return p
		}
	}
	return nil
}
