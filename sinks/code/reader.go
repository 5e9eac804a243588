package code

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jellydator/ttlcache/v3"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// ReaderConfig configures a Reader. Zero values are useful.
type ReaderConfig struct {
	// Limits bound each run of the parser; the zero value is
	// DefaultReaderLimits, and zero fields of others the sandbox's
	// defaults.
	Limits sandbox.Limits
	// MaxSource is the largest program read (default 1 MiB); a larger one
	// has an unverified contract.
	MaxSource int
	// CacheSize is how many contracts are kept, by the digest of what was
	// read (default 4096).
	CacheSize uint64
	// Logger logs readings that failed; nil discards.
	Logger *slog.Logger
}

// DefaultReaderLimits bound one run of the parser: CPython parses a large
// integration in tens of milliseconds.
func DefaultReaderLimits() sandbox.Limits {
	return sandbox.Limits{Wall: 10 * time.Second, CPU: 5 * time.Second, Memory: 512 << 20, FileSize: 1 << 20,
		Output: contract.MaxTreeBytes + 1}
}

// Reader reads programs' contracts: CPython's own parser (the ast module)
// runs confined in the sandbox with the program on its stdin and writes
// the tree as JSON (contract.Dumper); package contract reads the tree.
// Contracts are cached by the digest of the source, the names of the
// files beside it and the reader's version, so a program run again is not
// parsed again. A reading that failed (the sandbox could not start, a
// limit) is an unverified contract, not cached. Safe for concurrent use.
type Reader struct {
	sb    *sandbox.Sandbox
	cfg   ReaderConfig
	cache *ttlcache.Cache[string, *contract.Contract]
	log   *slog.Logger
}

// NewReader returns a reader parsing in sb.
func NewReader(sb *sandbox.Sandbox, cfg ReaderConfig) *Reader {
	if cfg.Limits == (sandbox.Limits{}) {
		cfg.Limits = DefaultReaderLimits()
	}
	if cfg.MaxSource <= 0 {
		cfg.MaxSource = 1 << 20
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 4096
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{sb: sb, cfg: cfg, log: log,
		cache: ttlcache.New(ttlcache.WithCapacity[string, *contract.Contract](cfg.CacheSize))}
}

func readKey(python string, source []byte, opts contract.Options) string {
	h := sha256.New()
	for _, part := range append([]string{contract.ReaderVersion, python, opts.Entry, string(source)}, slices.Sorted(slices.Values(opts.Files))...) {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Read returns the contract of source, a program for the Python
// interpreter at python (a path inside the sandbox). It never fails: a
// program that cannot be read has an unverified contract saying why. The
// returned contract is shared; do not modify it.
func (r *Reader) Read(ctx context.Context, python string, source []byte, opts contract.Options) *contract.Contract {
	if len(source) > r.cfg.MaxSource {
		return contract.Unverified(contract.ReasonTooComplex, fmt.Sprintf("the program is %d bytes; the reader reads at most %d", len(source), r.cfg.MaxSource))
	}
	key := readKey(python, source, opts)
	if it := r.cache.Get(key); it != nil {
		return it.Value()
	}
	tree, err := r.Tree(ctx, python, source)
	if err != nil {
		r.log.Warn("contract not read", "err", err)
		return contract.Unverified(contract.ReasonReaderFailed, err.Error())
	}
	c := contract.ReadJSON(tree, opts)
	r.cache.Set(key, c, ttlcache.NoTTL)
	return c
}

// Tree runs the parser on source in the sandbox and returns its output.
// It refuses to run the parser as the broker's own user outside a
// confined tier (sandbox.ErrNoSeparateUID): the program's contract is
// then unverified, which fails closed.
func (r *Reader) Tree(ctx context.Context, python string, source []byte) ([]byte, error) {
	if !r.sb.Confined() && !r.sb.SeparateUID() {
		return nil, fmt.Errorf("the parser would run unconfined as Gatehouse's own user: %w", sandbox.ErrNoSeparateUID)
	}
	res, err := r.sb.Run(ctx, sandbox.Spec{
		Argv:   []string{python, "-I", "-S", "-B", "-c", contract.Dumper},
		Env:    []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"},
		Stdin:  source,
		Limits: r.cfg.Limits,
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("the parser could not run in the sandbox: %w", err)
	case res.Killed != "":
		return nil, fmt.Errorf("the parser was stopped at its %s limit", res.Killed)
	case res.Truncated:
		return nil, fmt.Errorf("the parser's tree is larger than %d bytes", r.cfg.Limits.Output-1)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("the parser exited with status %d: %s", res.ExitCode, clipText(string(res.Stderr), 300))
	}
	return res.Stdout, nil
}

func clipText(s string, n int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Record is what a decision records of c: at most
// journal.MaxContractOperations operations and journal.MaxContractReasons
// reasons, each detail at most 300 bytes.
func Record(c *contract.Contract) *journal.ProgramContract {
	if c == nil {
		return nil
	}
	r := &journal.ProgramContract{Reader: c.Reader, Verified: c.Verified, Operations: []journal.ContractOperation{}}
	for i, op := range c.Operations {
		if i == journal.MaxContractOperations {
			r.OperationsTotal = len(c.Operations)
			break
		}
		r.Operations = append(r.Operations, journal.ContractOperation{Provider: op.Provider, Method: op.Method, Template: op.Template})
	}
	for i, p := range c.Problems {
		if i == journal.MaxContractReasons {
			r.ReasonsTotal = len(c.Problems)
			break
		}
		r.Unverified = append(r.Unverified, journal.ContractReason{Reason: string(p.Reason), Line: p.Line, Detail: clipText(p.Detail, 300)})
	}
	return r
}

// policyContract is what a program's calls to provider are held to: its
// operations for that provider when the contract is verified, nil (none
// could be read) otherwise.
func policyContract(c *contract.Contract, provider string) *policy.Contract {
	if c == nil || !c.Verified {
		return nil
	}
	pc := &policy.Contract{Operations: []policy.Operation{}}
	for _, op := range c.Operations {
		if op.Provider == provider {
			pc.Operations = append(pc.Operations, policy.Operation{Method: op.Method, Template: op.Template})
		}
	}
	return pc
}
