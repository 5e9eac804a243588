package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// newFlags returns a FlagSet for a subcommand. Its help (renderHelp) goes
// to env.stdout when asked for, once; on a mistake parse prints nothing of
// it and returns a one-line usage error (help.go).
func newFlags(env *cliEnv, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the flag package's own messages: parse words them
	fs.Usage = func() { renderHelp(env.stdout, name, usage, fs) }
	return fs
}

// parse parses flags and positional arguments in any order, as most CLIs
// do (the standard flag package stops at the first positional one).
// --help prints the help to stdout and returns errHelp; a bad flag is a
// usage error naming the command's --help.
func parse(env *cliEnv, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	usage := fs.Usage
	fs.Usage = func() {} // the flag package calls it on every error; only --help shows it
	defer func() { fs.Usage = usage }()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, errHelp
			}
			return nil, flagError(fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// subcommandHelp handles `gatehouse GROUP` given no subcommand (its help
// on stderr, exit status 2) or asked for help (-h, --help, help: its help
// on stdout, exit status 0), and then reports done.
func subcommandHelp(env *cliEnv, args []string, group, usage string) (done bool, err error) {
	if len(args) > 0 && !slices.Contains([]string{"-h", "--help", "help"}, args[0]) {
		return false, nil
	}
	if len(args) == 0 {
		renderHelp(env.stderr, group, usage, nil)
		return true, &exitError{code: exitUsage}
	}
	renderHelp(env.stdout, group, usage, nil)
	return true, nil
}

// journalDirArg is the journal a command reads: its one positional
// argument, or DATA_DIR/journal without one.
func journalDirArg(dataDir string, pos []string, cmd string) (string, error) {
	switch len(pos) {
	case 0:
		return filepath.Join(dataDir, "journal"), nil
	case 1:
		return pos[0], nil
	}
	return "", usageError("%s takes at most one directory", cmd)
}

// errHelp ends a command successfully after printing its help.
var errHelp = &exitError{code: exitOK}

// listFlag is a repeatable or comma-separated string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// flagSet is a FlagSet whose defaults can come from the environment:
// flag --nats-url reads GATEHOUSE_NATS_URL. A flag on the command line wins.
// The *Var methods below read the environment for their flag; with envAll
// (serve, writer) every flag does, however it was registered.
type flagSet struct {
	*flag.FlagSet
	env *cliEnv
	bad bool
	// envAll makes every flag settable as GATEHOUSE_<NAME>, documented in
	// its help, applied after the command line to the flags it did not set.
	envAll bool
}

func newEnvFlags(env *cliEnv, name, usage string) *flagSet {
	return &flagSet{FlagSet: newFlags(env, name, usage), env: env}
}

func envName(flagName string) string {
	return "GATEHOUSE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flagSet) fromEnv(name string) (string, bool) {
	v := f.env.getenv(envName(name))
	return v, v != ""
}

func (f *flagSet) stringVar(p *string, name, def, usage string) {
	if v, ok := f.fromEnv(name); ok {
		def = v
	}
	f.StringVar(p, name, def, usage+" ($"+envName(name)+")")
}

func (f *flagSet) intVar(p *int, name string, def int, usage string) {
	f.IntVar(p, name, def, usage+" ($"+envName(name)+")")
	if v, ok := f.fromEnv(name); ok {
		f.envErr(name, f.Set(name, v))
	}
}

func (f *flagSet) boolVar(p *bool, name string, def bool, usage string) {
	f.BoolVar(p, name, def, usage+" ($"+envName(name)+")")
	if v, ok := f.fromEnv(name); ok {
		f.envErr(name, f.Set(name, v))
	}
}

// envErr reports a bad environment value; parse then fails with it.
func (f *flagSet) envErr(name string, err error) {
	if err != nil {
		fmt.Fprintf(f.env.stderr, "$%s: %v\n", envName(name), err)
		f.bad = true
	}
}

func (f *flagSet) parse(args []string) ([]string, error) {
	if f.bad {
		return nil, usageHint(f.Name(), "a GATEHOUSE_ environment variable holds a bad value (above)")
	}
	if f.envAll {
		f.VisitAll(func(fl *flag.Flag) {
			if own := "$" + envName(fl.Name); !strings.Contains(fl.Usage, own) {
				fl.Usage += " (" + own + ")"
			}
		})
	}
	pos, err := parse(f.env, f.FlagSet, args)
	if err != nil || !f.envAll {
		return pos, err
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	var bad []string
	f.VisitAll(func(fl *flag.Flag) {
		if given[fl.Name] {
			return // on the command line (or read from the environment when registered)
		}
		if v, ok := f.fromEnv(fl.Name); ok {
			if err := fl.Value.Set(v); err != nil {
				bad = append(bad, fmt.Sprintf("$%s: %v", envName(fl.Name), err))
			}
		}
	})
	if len(bad) > 0 {
		return nil, usageHint(f.Name(), strings.Join(bad, "; "))
	}
	return pos, nil
}
