package main

//go:generate sh -c "go run . sinks --markdown > ../../sinks/REFERENCE.md"

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/code"
	mcpsink "github.com/gatehouse/gatehouse/sinks/mcp"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/peer"
	"github.com/gatehouse/gatehouse/sinks/process"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/workspace"
)

// referencePath is the generated reference in the repository, linked from
// the README and from every error that sends a user to the params.
const referencePath = "sinks/REFERENCE.md"

const sinksUsage = `Usage: gatehouse sinks [SINK | SINK.ACTION] [--json | --markdown]

Lists every sink's actions and the params each takes: the reference of
what 'gatehouse effect SINK --action A --params JSON' (or an agent's
request on gatehouse.v1.agent.<agent>.effect.<SINK>) may send. It is
built from the sinks' own descriptions and the Go types their params
decode into, so it is what this binary accepts; params are decoded
strictly, and a field not listed is BAD_REQUEST. A deployment serves
provider only with --providers, and mcp's tools with --mcp-servers (each
pinned upstream tool is its own action then; 'gatehouse mcp upstream show').

--json prints each action with its JSON Schema (draft 2020-12); --markdown
prints the reference as sinks/REFERENCE.md holds it.
`

// refAction is one action as the reference shows it.
type refAction struct {
	Sink        policy.Sink        `json:"sink"`
	Action      string             `json:"action"`
	Tool        string             `json:"tool"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Mutates     bool               `json:"mutates"`
	Class       policy.EffectClass `json:"class,omitempty"`
	System      string             `json:"system,omitempty"`
	Params      []refParam         `json:"params"`
	Schema      *jsonschema.Schema `json:"schema"`
	Examples    []json.RawMessage  `json:"examples,omitempty"`
}

// refParam is one property of an action's params.
type refParam struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

// referenceActions are the actions of the sinks this binary has, once per
// process.
var referenceActions = sync.OnceValues(describeSinks)

// describeSinks describes every sink this binary has. The descriptions
// are static, so no sink is opened (the mcp sink's generic call is
// described by a sink with an empty catalogue, which starts nothing but
// its janitor, stopped at once).
func describeSinks() ([]refAction, error) {
	mcp, err := mcpsink.New(context.Background(), mcpsink.Config{Catalogue: &mcpsink.Catalogue{}, Pins: &mcpsink.Pins{}})
	if err != nil {
		return nil, err
	}
	defer mcp.Close()
	// The code sink describes register only with a registry, as serve
	// always gives it one; the others describe themselves without state.
	codeSink := code.New(nil, code.Config{Registry: new(code.Registry)})
	sinks := []broker.Sink{(*output.Sink)(nil), codeSink, (*process.Sink)(nil), (*artifact.Sink)(nil),
		(*workspace.Sink)(nil), (*memory.Sink)(nil), (*peer.Sink)(nil), (*provider.Sink)(nil), (*browser.Pool)(nil), mcp}
	acts, err := describedActions(sinks)
	if err != nil {
		return nil, err
	}
	var out []refAction
	for _, a := range acts {
		s, err := a.Schema()
		if err != nil {
			return nil, err
		}
		r := refAction{Sink: a.Sink, Action: a.Name, Tool: a.ToolName(), Title: a.Title, Description: a.Description,
			Mutates: a.Mutates, Class: a.Class, System: a.System, Schema: s, Examples: a.Examples, Params: []refParam{}}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := s.Properties[n]
			r.Params = append(r.Params, refParam{Name: n, Type: schemaType(p), Required: slices.Contains(s.Required, n), Description: p.Description})
		}
		out = append(out, r)
	}
	return out, nil
}

// schemaType names a property's type for a person: string, integer,
// boolean, array of string, object of string (base64), any JSON value.
func schemaType(s *jsonschema.Schema) string {
	if s == nil {
		return "any JSON value"
	}
	t := s.Type
	if t == "" && len(s.Types) > 0 {
		var ts []string
		for _, x := range s.Types {
			if x != "null" {
				ts = append(ts, x)
			}
		}
		t = strings.Join(ts, " or ")
	}
	switch t {
	case "":
		return "any JSON value"
	case "array":
		return "array of " + schemaType(s.Items)
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil && len(s.Properties) == 0 {
			return "object of " + schemaType(s.AdditionalProperties)
		}
		return "object"
	case "string":
		if s.ContentEncoding == "base64" {
			return "string (base64)"
		}
	}
	return t
}

// actionsOf lists the actions of sink in the reference, by name.
func actionsOf(sink policy.Sink) []string {
	acts, err := referenceActions()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range acts {
		if a.Sink == sink && !slices.Contains(out, a.Action) {
			out = append(out, a.Action)
		}
	}
	return out
}

func cmdSinks(_ context.Context, env *cliEnv, args []string) error {
	var asJSON, markdown bool
	fs := newFlags(env, "sinks", sinksUsage)
	fs.BoolVar(&asJSON, "json", false, "print every action with its params' JSON Schema, as JSON")
	fs.BoolVar(&markdown, "markdown", false, "print the reference as sinks/REFERENCE.md holds it")
	pos, err := parse(env, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 || asJSON && markdown {
		return usageHint("sinks", "sinks takes at most one SINK or SINK.ACTION, and one of --json and --markdown")
	}
	acts, err := referenceActions()
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		sink, action, _ := strings.Cut(pos[0], ".")
		var keep []refAction
		for _, a := range acts {
			if string(a.Sink) == sink && (action == "" || a.Action == action) {
				keep = append(keep, a)
			}
		}
		if len(keep) == 0 {
			return usageHint("sinks", fmt.Sprintf("no sink or action %q here: %s", pos[0], sinkNames(acts)))
		}
		acts = keep
	}
	switch {
	case asJSON:
		return printJSON(env, acts)
	case markdown:
		writeReference(env.stdout, acts)
	default:
		printActions(env.stdout, acts)
	}
	return nil
}

func sinkNames(acts []refAction) string {
	var names []string
	for _, a := range acts {
		if !slices.Contains(names, string(a.Sink)) {
			names = append(names, string(a.Sink))
		}
	}
	return strings.Join(names, ", ")
}

func printActions(w io.Writer, acts []refAction) {
	for i, a := range acts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s.%s: %s\n", a.Sink, a.Action, a.Title)
		for _, l := range wrap(a.Description, 76) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if len(a.Params) == 0 {
			fmt.Fprintln(w, "  params: none ({})")
		} else {
			fmt.Fprintln(w, "  params:")
		}
		width := 0
		for _, p := range a.Params {
			width = max(width, len(p.Name))
		}
		for _, p := range a.Params {
			req := "optional"
			if p.Required {
				req = "required"
			}
			fmt.Fprintf(w, "    %-*s  %s, %s\n", width, p.Name, p.Type, req)
			for _, l := range wrap(p.Description, 70) {
				fmt.Fprintf(w, "    %-*s    %s\n", width, "", l)
			}
		}
		for _, e := range a.Examples {
			fmt.Fprintf(w, "  gatehouse effect %s --run RUN%s --params '%s'\n", a.Sink, actionFlag(a), compactJSON(e))
		}
	}
}

// actionFlag is the --action an example needs: none for a sink with one
// action, which effect fills in.
func actionFlag(a refAction) string {
	if len(actionsOf(a.Sink)) == 1 {
		return ""
	}
	return " --action " + a.Action
}

func compactJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

// writeReference writes the reference in Markdown: an index, then each
// sink's actions with their params table and an example.
func writeReference(w io.Writer, acts []refAction) {
	fmt.Fprint(w, `# Sink actions and their params

Generated by `+"`gatehouse sinks --markdown`"+` from the sinks' own descriptions and the Go
types their params decode into (`+"`go generate ./cmd/gatehouse`"+` writes this file; a test
fails when it and the code differ). `+"`gatehouse sinks SINK`"+` prints the same at a terminal,
`+"`--json`"+` with each action's JSON Schema.

An agent proposes an effect on `+"`gatehouse.v1.agent.<agent>.effect.<sink>`"+` as
`+"`{\"run\": \"r_...\", \"action\": \"<action>\", \"params\": {...}}`"+`; from a terminal,
`+"`gatehouse effect <sink> --run RUN --action <action> --params '<json>'`"+` (a sink with one
action needs no `+"`--action`"+`). Params are decoded strictly: a field not listed here is
`+"`BAD_REQUEST`"+`. A deployment serves `+"`provider`"+` only with `+"`--providers`"+`, and
`+"`mcp`"+` with `+"`--mcp-servers`"+`, where each pinned upstream tool is an action of its own
(`+"`gatehouse mcp upstream show SERVER`"+`).

| sink | actions |
|---|---|
`)
	var sinks []policy.Sink
	for _, a := range acts {
		if !slices.Contains(sinks, a.Sink) {
			sinks = append(sinks, a.Sink)
		}
	}
	for _, s := range sinks {
		var links []string
		for _, a := range acts {
			if a.Sink == s {
				links = append(links, fmt.Sprintf("[`%s`](#%s%s)", a.Action, s, a.Action))
			}
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", s, strings.Join(links, ", "))
	}
	for _, s := range sinks {
		fmt.Fprintf(w, "\n## %s\n", s)
		for _, a := range acts {
			if a.Sink != s {
				continue
			}
			fmt.Fprintf(w, "\n### %s.%s\n\n**%s.** %s\n\n", a.Sink, a.Action, a.Title, mdText(a.Description))
			var facts []string
			if a.Class != "" {
				facts = append(facts, "effect class `"+string(a.Class)+"`")
			}
			if a.System != "" {
				facts = append(facts, "mandate system `"+a.System+"`")
			}
			facts = append(facts, "agent cards name it `"+a.Tool+"`")
			if !a.Mutates {
				facts = append(facts, "it only reads")
			}
			fmt.Fprintf(w, "%s.\n\n", upperFirst(strings.Join(facts, "; ")))
			if len(a.Params) == 0 {
				fmt.Fprint(w, "Params: none (`{}`).\n")
			} else {
				fmt.Fprint(w, "| param | type | required | what it is |\n|---|---|---|---|\n")
				for _, p := range a.Params {
					req := ""
					if p.Required {
						req = "yes"
					}
					fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", p.Name, p.Type, req, strings.ReplaceAll(mdText(p.Description), "|", "\\|"))
				}
			}
			for _, e := range a.Examples {
				fmt.Fprintf(w, "\n```sh\ngatehouse effect %s --run RUN%s --params '%s'\n```\n", a.Sink, actionFlag(a), compactJSON(e))
			}
		}
	}
}

// mdText is text safe in Markdown prose: <run> would be read as HTML.
func mdText(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// describedActions is broker.DescribedActions, a sink whose description
// needs state it was not given reported as an error, not a crash.
func describedActions(sinks []broker.Sink) (acts []broker.Action, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a sink cannot describe its actions without its state (sinks.go builds it): %v", r)
		}
	}()
	return broker.DescribedActions(sinks), nil
}
