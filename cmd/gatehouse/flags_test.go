package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

// sample is a value flag f accepts, different from its default.
func sample(f *flag.Flag) string {
	switch f.Value.(type) {
	case *listFlag:
		return "a,b"
	}
	switch f.DefValue {
	case "true", "false":
		if f.DefValue == "true" {
			return "false"
		}
		return "true"
	}
	if _, err := time.ParseDuration(f.DefValue); err == nil {
		return "3s"
	}
	if strings.Trim(f.DefValue, "-0123456789") == "" && f.DefValue != "" {
		return "7"
	}
	return "from-env"
}

// Every serve flag reads GATEHOUSE_<NAME> (and says so in its help), and
// the command line wins over it.
func TestEveryServeFlagReadsTheEnvironment(t *testing.T) {
	var names []*flag.Flag
	var probe serveConfig
	serveFlags(&cliEnv{getenv: func(string) string { return "" }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, &probe).VisitAll(func(f *flag.Flag) { names = append(names, f) })
	vals := map[string]string{}
	for _, f := range names {
		vals[envName(f.Name)] = sample(f)
	}
	var c serveConfig
	var out bytes.Buffer
	env := &cliEnv{getenv: func(k string) string { return vals[k] }, stdout: &out, stderr: &out}
	fs := serveFlags(env, &c)
	if _, err := fs.parse(nil); err != nil {
		t.Fatalf("parse: %v\n%s", err, out.String())
	}
	fs.VisitAll(func(f *flag.Flag) {
		if got, want := f.Value.String(), vals[envName(f.Name)]; got != want && !(want == "3s" && got == "3s") {
			t.Errorf("--%s from $%s: %q, want %q", f.Name, envName(f.Name), got, want)
		}
		if !strings.Contains(f.Usage, "$"+envName(f.Name)) {
			t.Errorf("--%s: its help does not name $%s", f.Name, envName(f.Name))
		}
	})
	// The command line wins, for a list too.
	var c2 serveConfig
	fs = serveFlags(env, &c2)
	if _, err := fs.parse([]string{"--sandbox-tiers", "landlock", "--mode", "strict"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c2.sandboxTiers, ",") != "landlock" || c2.mode != "strict" {
		t.Fatalf("command line lost to the environment: %v %q", c2.sandboxTiers, c2.mode)
	}
}
