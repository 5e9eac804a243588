package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// newFlags returns a FlagSet for a subcommand whose help goes to env.stdout
// when asked for and to env.stderr on misuse.
func newFlags(env *cliEnv, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and positional arguments in any order, as most CLIs
// do (the standard flag package stops at the first positional one). --help
// prints usage to stdout and returns errHelp.
func parse(env *cliEnv, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(env.stdout)
				fs.Usage()
				return nil, errHelp
			}
			return nil, &exitError{code: exitUsage}
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

// subcommandHelp prints usage to stdout when a command with subcommands
// is given none (exit status 2) or one of helpWords (exit status 0), and
// then reports done.
func subcommandHelp(env *cliEnv, args []string, usage string, helpWords ...string) (done bool, err error) {
	if len(args) > 0 && !slices.Contains(helpWords, args[0]) {
		return false, nil
	}
	fmt.Fprint(env.stdout, usage)
	if len(args) == 0 {
		return true, &exitError{code: exitUsage}
	}
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
type flagSet struct {
	*flag.FlagSet
	env *cliEnv
	bad bool
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
		fmt.Fprintf(f.Output(), "$%s: %v\n", envName(name), err)
		f.bad = true
	}
}

func (f *flagSet) parse(args []string) ([]string, error) {
	if f.bad {
		return nil, &exitError{code: exitUsage}
	}
	return parse(f.env, f.FlagSet, args)
}
