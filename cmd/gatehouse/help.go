package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// How the CLI talks, the way nats, vault and cosign do:
//
//   - `gatehouse CMD --help` (or -h, or `gatehouse help CMD`) prints the
//     command's help once, on stdout, and exits 0: its usage lines and
//     description, two or three examples, its exit statuses and its flags.
//   - A mistake (an unknown flag, a missing argument) prints one line on
//     stderr saying what is wrong and which --help to read, and exits 2.
//     Help is never printed on a mistake, so stderr stays readable.
//   - Every command that reports takes --json and prints one JSON value
//     (an object; an array for a list) on one line (printJSON), with
//     snake_case field names.
//
// The examples and exit statuses of every command are in cmdDocs
// (helpdocs.go); a test runs every command's --help through the built
// binary and requires both.

// cmdDoc is what a command's help adds to its usage text.
type cmdDoc struct {
	// examples are command lines as a user types them, each optionally
	// followed by "  # what it does".
	examples []string
	// exits are the command's exit statuses, in order.
	exits []exitDoc
}

type exitDoc struct {
	code int
	when string
}

// renderHelp writes the full help of the command called name: usage,
// examples, exit statuses, then fs's flags (fs may be nil).
func renderHelp(w io.Writer, name, usage string, fs *flag.FlagSet) {
	fmt.Fprintln(w, strings.TrimRight(usage, "\n"))
	d := docFor(name)
	if len(d.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range d.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(d.exits) > 0 {
		fmt.Fprintln(w, "\nExit status:")
		for _, e := range d.exits {
			fmt.Fprintf(w, "  %d  %s\n", e.code, e.when)
		}
	}
	if fs != nil {
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nFlags:")
			printFlags(w, fs)
		}
	}
}

// docFor is the doc of a command; a subcommand without its own ("approve
// show") has its group's ("approve").
func docFor(name string) cmdDoc {
	if d, ok := cmdDocs[name]; ok {
		return d
	}
	if group, _, ok := strings.Cut(name, " "); ok {
		return cmdDocs[group]
	}
	return cmdDoc{}
}

// printFlags lists fs's flags as --name TYPE, then the description,
// wrapped, with the default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		switch {
		case isBoolFlag(f):
		case typ == "value":
			line += " list" // listFlag: repeat it, or separate with commas
		case typ != "":
			line += " " + typ
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
		for _, l := range wrap(usage, 72) {
			fmt.Fprintf(w, "      %s\n", l)
		}
	}
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wrap cuts s into lines of at most width runes at spaces.
func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(s) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// flagError turns the flag package's error into the CLI's wording
// (--flag, as the help and the README write flags) and says where help is.
func flagError(name string, err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		msg = "unknown flag " + dashes(strings.TrimPrefix(msg, "flag provided but not defined: "))
	case strings.HasPrefix(msg, "flag needs an argument: "):
		msg = "flag " + dashes(strings.TrimPrefix(msg, "flag needs an argument: ")) + " needs a value"
	default:
		// invalid value "x" for flag -n: parse error
		if i := strings.Index(msg, " for flag -"); i >= 0 {
			rest := msg[i+len(" for flag -"):]
			fname, why, _ := strings.Cut(rest, ": ")
			msg = fmt.Sprintf("--%s: %s%s", fname, strings.TrimPrefix(msg[:i], "invalid "), ": "+why)
		}
	}
	return usageHint(name, msg)
}

// dashes writes a flag the flag package named -x or --x as --x.
func dashes(f string) string { return "--" + strings.TrimLeft(f, "-") }

// usageHint is a usage error (exit status 2) whose message ends by
// pointing at the command's help.
func usageHint(name, msg string) error {
	return &exitError{code: exitUsage, err: fmt.Errorf("%s\nRun 'gatehouse %s --help' for usage.", msg, name)}
}

// unknownSubcommand is the error for `gatehouse GROUP SUB` where SUB is
// not one of GROUP's commands.
func unknownSubcommand(group, sub string, subs ...string) error {
	return usageHint(group, fmt.Sprintf("unknown %s command %q (%s)", group, sub, strings.Join(subs, ", ")))
}
