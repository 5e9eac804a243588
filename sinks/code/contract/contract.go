package contract

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ReaderVersion names this reader. It is recorded with every contract, so
// a contract read by another version is known as such; it changes whenever
// what the reader accepts changes.
const ReaderVersion = "gatehouse-contract/1"

// Contract is what a program's own code can send through the gateway, read
// before it runs.
//
// Verified means every gateway call the program can make is one of
// Operations: no construct the reader cannot follow is reachable from the
// program's entry. An unverified contract names every reason in Problems;
// its Operations are those the reader could still read, for people to see,
// and are never a promise.
type Contract struct {
	Reader     string      `json:"reader"`
	Verified   bool        `json:"verified"`
	Operations []Operation `json:"operations"`
	Problems   []Problem   `json:"unverified,omitempty"`
	// Entries names the functions read as entries, when the module's body
	// sends nothing itself and the program is read as a library: each
	// top-level function that calls the client, called with its input.
	Entries []string `json:"entries,omitempty"`
	// Unreached lists functions that contain gateway calls but are never
	// called from the entry, so none of their calls is in the contract.
	Unreached []string `json:"unreached,omitempty"`
}

// Operation is one operation the program can send: the provider, the
// method (upper case) and the path template relative to the provider's
// base URL, where a "{name}" segment stands for one path segment computed
// at run time.
type Operation struct {
	Provider string `json:"provider"`
	Method   string `json:"method"`
	Template string `json:"template"`
}

func (o Operation) String() string { return o.Method + " " + o.Provider + " " + o.Template }

// Problem is one reason a contract is not verified, with where the reader
// met it.
type Problem struct {
	Reason Reason `json:"reason"`
	Line   int    `json:"line,omitempty"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", p.Line, p.Reason, p.Detail)
	}
	return fmt.Sprintf("%s: %s", p.Reason, p.Detail)
}

// Reason is the stable name of why a contract is not verified.
type Reason string

const (
	// The gateway call's path, method or provider is computed at run time.
	ReasonURLAtRunTime      Reason = "url-at-run-time"
	ReasonMethodAtRunTime   Reason = "method-at-run-time"
	ReasonProviderAtRunTime Reason = "provider-at-run-time"
	// A gateway call's arguments are unpacked from a value built at run time.
	ReasonArgumentsAtRunTime Reason = "arguments-at-run-time"
	// A module the reader does not know (a helper module, a network library).
	ReasonUnknownModule Reason = "unknown-module"
	// A name that is not defined, or an attribute of a known module the
	// reader does not know to be harmless.
	ReasonUnknownHelper Reason = "unknown-helper"
	// A call of a value the reader cannot follow (a function taken from
	// run-time data, a parameter never given a known function).
	ReasonUnknownCallee Reason = "unknown-callee"
	// eval, exec, compile.
	ReasonEval Reason = "eval"
	// __import__, importlib, a module chosen at run time.
	ReasonDynamicImport Reason = "dynamic-import"
	// getattr, setattr, delattr with a name computed at run time; writing
	// attributes of modules and functions.
	ReasonDynamicAttribute Reason = "dynamic-attribute"
	// globals(), locals(), vars(), __dict__, __class__ and other dunders,
	// frames, the builtins module.
	ReasonIntrospection Reason = "introspection"
	// Reaching a file descriptor, a process or the network another way than
	// the gateway client: os.write, os.fdopen, subprocess, socket, ...
	ReasonRawChannel Reason = "raw-channel"
	// Writing a file whose name is computed at run time, or one that could
	// be imported as a module.
	ReasonFileWrite Reason = "file-write"
	// A file beside the program has the name of a module it imports.
	ReasonShadowedModule Reason = "shadowed-module"
	// Python the reader does not follow: async code, some class features.
	ReasonUnsupported Reason = "unsupported"
	// The program is beyond the reader's budget (steps, call depth).
	ReasonTooComplex Reason = "too-complex"
	// The program does not parse, or the parser's tree cannot be read.
	ReasonParse Reason = "parse-error"
	// The program is not Python.
	ReasonNotPython Reason = "not-python"
	// The reader could not run (the sandbox failed, a time limit).
	ReasonReaderFailed Reason = "reader-failed"
)

// Reasons lists every Reason, for documentation and tests.
var Reasons = []Reason{
	ReasonURLAtRunTime, ReasonMethodAtRunTime, ReasonProviderAtRunTime, ReasonArgumentsAtRunTime,
	ReasonUnknownModule, ReasonUnknownHelper, ReasonUnknownCallee, ReasonEval, ReasonDynamicImport,
	ReasonDynamicAttribute, ReasonIntrospection, ReasonRawChannel, ReasonFileWrite, ReasonShadowedModule,
	ReasonUnsupported, ReasonTooComplex, ReasonParse, ReasonNotPython, ReasonReaderFailed,
}

// Unverified returns an unverified contract with one problem: for a
// program the reader could not read at all.
func Unverified(r Reason, detail string) *Contract {
	return &Contract{Reader: ReaderVersion, Operations: []Operation{}, Problems: []Problem{{Reason: r, Detail: detail}}}
}

// Options are what the reader knows besides the program's tree.
type Options struct {
	// Files are the names (relative paths) of the other files written
	// beside the program; a Python module among them shadows a module of
	// the same name.
	Files []string
	// Entry names a function of the module to call after the module's
	// body has run, with plain data the reader does not know (what a runner
	// hands an integration: its JSON input); "" reads the module as a
	// script (its body is the entry).
	Entry string
	// MaxSteps bounds the reader's work; 0 is DefaultMaxSteps.
	MaxSteps int
}

// DefaultMaxSteps bounds the work of one reading (expressions and
// statements evaluated): far beyond what a hand-written integration
// needs, and a few tens of milliseconds of work.
const DefaultMaxSteps = 400_000

// Read reads the contract of the program whose tree is t. It never fails:
// a program the reader cannot read has an unverified contract saying why.
// Read does no I/O and keeps nothing; it is safe for concurrent use.
func Read(t *Tree, opts Options) *Contract {
	switch {
	case t == nil:
		return Unverified(ReasonParse, "no parser tree")
	case t.Err != nil:
		return Unverified(ReasonParse, "the program does not parse: "+t.Err.Error())
	case t.Module == nil:
		return Unverified(ReasonParse, "the parser tree has no module")
	}
	c := analyse(t, opts)
	c.Reader = ReaderVersion
	slices.SortFunc(c.Operations, func(a, b Operation) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Template, b.Template), cmp.Compare(a.Method, b.Method))
	})
	c.Operations = slices.Compact(c.Operations)
	if c.Operations == nil {
		c.Operations = []Operation{}
	}
	slices.SortFunc(c.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Detail, b.Detail))
	})
	c.Problems = slices.Compact(c.Problems)
	slices.Sort(c.Unreached)
	c.Unreached = slices.Compact(c.Unreached)
	c.Verified = len(c.Problems) == 0
	return c
}

// ReadJSON reads the dumper's output b: ReadTree then Read, with a tree
// that cannot be read giving an unverified contract.
func ReadJSON(b []byte, opts Options) *Contract {
	t, err := ReadTree(b)
	if err != nil {
		return Unverified(ReasonParse, err.Error())
	}
	return Read(t, opts)
}

// Summary is the contract in one line, for logs and the CLI.
func (c *Contract) Summary() string {
	ops := make([]string, len(c.Operations))
	for i, o := range c.Operations {
		ops[i] = o.String()
	}
	if c.Verified {
		return fmt.Sprintf("verified: %d operation(s): %s", len(ops), strings.Join(ops, ", "))
	}
	return fmt.Sprintf("unverified (%d reason(s)); operations read: %s", len(c.Problems), strings.Join(ops, ", "))
}
