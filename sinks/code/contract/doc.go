// Package contract reads, from a Python program's own code, every
// operation it can send through Gatehouse's client module (gatehouse.call
// and its method helpers): provider, method and path template. The result
// is the program's operation contract; a contract is verified when every
// call the program can make is one of its operations, and otherwise says
// why not, with a stable Reason and the line.
//
// # Flow
//
// The code sink runs Dumper (CPython's own parser, compile() with
// PyCF_ONLY_AST) confined in the sandbox with the program on stdin; the
// tree comes back as JSON. ReadTree reads that JSON defensively (it is the
// output of a program that parsed untrusted text: size, depth and node
// count are bounded, anything malformed is an error, never a panic; a
// fuzz target holds it to that). Read then interprets the module
// abstractly, from its body (the program is run as a script) and, with
// Options.Entry, a named function called with plain data. Read does no
// I/O: this package imports no os, no net, nothing of the broker.
//
// # The analysis
//
// An abstract interpreter over Python's statements and expressions. A
// value is what the reader knows of every value a name can hold at a
// point: known text with holes for run-time parts (a hole is one value
// formatted in; a span is text it cannot bound, such as a path extended
// in a loop), known numbers, bools and None, tuples, lists, dicts, sets
// and instances on an abstract heap (one object per place in the code that
// makes it), functions with the frame they close over, classes, modules,
// the builtins it models, plain run-time data (JSON, text, numbers), and
// top, anything at all. Unions keep a few alternatives, then widen.
//
// It follows module constants, local variables and their reassignments
// (flow-sensitively: branches are joined, loops run to a fixpoint with
// widening, or item by item over a known sequence), f-strings, %
// formatting, str.format, concatenation, join and os.path.join into
// templates, helper functions and closures called from the entry (each
// call followed with its own arguments, so a dispatcher's branches on a
// constant or parameter are pruned: `if method == "get":` when method is
// known; comparisons with strings and None also narrow a name on each
// branch), decorators, functools.partial, generators and comprehensions,
// dicts and lists of functions, classes with their methods, properties and
// inheritance, try/except/finally, with, match. Recursion is followed once
// more with unknown arguments. The heap is flow-insensitive: a read sees
// every write, even a later one; the reader repeats its pass until the
// heap stops growing (values still growing after a few passes widen).
//
// # Soundness
//
// Verified means: the program cannot send, through the gateway, an
// operation outside the contract. The reader gets there by an allowlist,
// not a denylist. A module, builtin or attribute it does not model is a
// reason (unknown-module, unknown-helper), as is anything that reaches
// the gateway's descriptors, a process or the network another way
// (raw-channel: os.write, os.fdopen, open() of a descriptor or of a path
// outside the workspace for writing, subprocess, socket, ...), runs code
// it cannot see (eval, exec, compile, pickle, the debugger), imports by a
// name computed at run time, reads or writes attributes by a computed
// name, looks into frames, globals or dunders, replaces an attribute of a
// module (json.dumps, gatehouse.call), writes a file Python could import
// in place of a module, or calls a value it cannot tell (top). The client
// is modelled as the module in sinks/code is written: one request per
// call, provider, method and path as given, a query after "?" sent as the
// query, a keyword it does not take raising before anything is sent; a
// test holds the module to this model.
//
// Values the reader cannot follow further are handed away (escape): a
// function given to a standard function it does not model, stored in
// run-time data or returned by one handed away is followed at once with
// unknown arguments, as is every special method of an instance when it is
// made (Python may call those on its own: __str__ when formatting, __lt__
// when sorting, __del__ whenever). An instance handed away has every
// method and property of its class followed too (the code given it may
// call them: print's file.write, dict(obj)'s keys, a closing's close), a
// class handed away its static and class methods, a generator handed
// away (bytes() iterates it) its body; a module may be handed away only
// when nothing in it reaches past the gateway, runs code or imports, and
// a value nested deeper than the reader follows is a reason (too-complex).
// Such code may run at any later time, so while following it every name
// of an older frame reads as the join of every value it is ever bound to.
// Having followed them there, the reader
// treats a call of plain run-time data as harmless: whatever it can be is
// already covered.
//
// A hole stands for one path segment. A run-time value with a "/" in it
// sends a path with more segments, which the template does not match: the
// gateway decides such a call outside the contract and refuses it in
// strict mode. A segment with a hole anywhere in it becomes one
// placeholder ("/invoices/INV-{n}" is "/invoices/{n}"), so a contract may
// allow more than the code sends, never less. A path whose start, or every
// segment, is computed at run time is url-at-run-time. A test runs every
// verified corpus program against a recording stand-in client and checks
// each call it makes is in its contract.
//
// Choices where the issue was silent: a program that sends nothing has an
// empty verified contract; a program whose contract is unverified still
// lists the operations read so far, marked as no promise; functions with
// gateway calls that the entry never reaches are listed (Unreached) and
// are not in the contract; a class defining __getattr__, __setattr__,
// descriptors or __new__, a metaclass, or a base the reader does not know
// is unsupported; async code is unsupported; the reader's work is bounded
// (DefaultMaxSteps, call depth, passes) and a program beyond it is
// too-complex.
package contract
