package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	mcpsink "github.com/gatehouse/gatehouse/sinks/mcp"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

const policyCheckUsage = `Usage: gatehouse policy check [--policy F] [--providers F] [--grounding F] [--mcp-servers F] [--json]

Loads each file given with the loaders gatehouse serve uses (the policy
rules file, the provider catalogue, the grounding rules) and checks them
against each other before anything is served:

  - every grounding rule fits operations the catalogue declares: its
    provider, method and path (paths are matched as sent, the base_url's
    path included), and every record it binds is a GET some integration
    declares;
  - every approvals and scopes rule about provider calls fits a declared
    operation, and every provider, integration and host a rule names is in
    the catalogue;
  - every effects target about provider calls can match one (a target is
    host and path as sent, the base_url's path included);
  - no agent card's tool pattern is written the way an MCP client shows
    the tool (bank__transfer for bank/transfer, output_deliver for
    output.deliver), which would match nothing.

Notes (a grounding rule that leaves other_fields at allow) are printed
too, and do not fail the check.

Each problem is printed with its file, rule and what to write instead.
--grounding needs --providers, as serve does; with --mcp-servers, grounding
rules may also match upstream MCP tool calls (provider <server>, POST
/tools/<tool>). Run it first on a new
deployment, and after every change to one of the files.
`

// checkProblem is one problem policy check found.
type checkProblem struct {
	File    string `json:"file"`
	Rule    string `json:"rule,omitempty"` // e.g. grounding rule[0] "supplier-payment", approvals[1] "payments"
	Part    string `json:"part,omitempty"`
	Problem string `json:"problem"`
	Fix     string `json:"fix,omitempty"`
}

// checkGrounds is what a grounding rule grounds.
type checkGrounds struct {
	Rule       string   `json:"rule"`
	Operations []string `json:"operations"` // "erp.pay POST /api/payments"
}

// checkReport is policy check's result.
type checkReport struct {
	Files    []string       `json:"files"` // "providers.yaml: 1 provider, 2 integrations"
	Grounds  []checkGrounds `json:"grounds,omitempty"`
	Problems []checkProblem `json:"problems"`
	// Notes are what loads but is likely a mistake (a grounding rule that
	// leaves other_fields at allow); they do not make the check fail.
	Notes []checkProblem `json:"notes,omitempty"`
	OK    bool           `json:"ok"`
}

func cmdPolicyCheck(_ context.Context, env *cliEnv, args []string) error {
	var (
		policyFile, providersFile, groundingFile, mcpFile string
		asJSON                                            bool
	)
	fs := newEnvFlags(env, "policy check", policyCheckUsage)
	fs.StringVar(&policyFile, "policy", "", "the policy rules file")
	fs.StringVar(&providersFile, "providers", "", "the provider catalogue")
	fs.StringVar(&groundingFile, "grounding", "", "the grounding rules file (needs --providers)")
	fs.StringVar(&mcpFile, "mcp-servers", "", "the catalogue of upstream MCP servers, whose tool calls grounding rules may match")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageError("policy check takes no arguments; name the files with --policy, --providers and --grounding")
	case policyFile == "" && providersFile == "" && groundingFile == "":
		return usageHint("policy check", "give at least one of --policy, --providers and --grounding")
	case groundingFile != "" && providersFile == "":
		return usageError("--grounding needs --providers: grounding rules are checked against the catalogue, as serve does")
	}
	rep := runPolicyCheck(policyFile, providersFile, groundingFile, mcpFile)
	if err := writeReport(env.stdout, asJSON, rep, func() { printPolicyCheck(env.stdout, rep) }); err != nil {
		return err
	}
	if !rep.OK {
		return &exitError{code: exitFindings}
	}
	return nil
}

// runPolicyCheck loads the files given ("" for none) and checks them.
func runPolicyCheck(policyFile, providersFile, groundingFile, mcpFile string) *checkReport {
	rep := &checkReport{Problems: []checkProblem{}}
	fail := func(file string, err error, fix string) {
		rep.Problems = append(rep.Problems, checkProblem{File: file, Problem: err.Error(), Fix: fix})
	}
	var cat *provider.Catalogue
	if providersFile != "" {
		c, err := provider.LoadCatalogue(providersFile)
		if err != nil {
			fail(providersFile, err, "fix the catalogue so it loads; serve refuses to start with it")
		} else {
			cat = c
			ops := 0
			for _, in := range c.Integrations {
				ops += len(in.Operations)
			}
			rep.Files = append(rep.Files, fmt.Sprintf("%s: %s, %s, %s", providersFile,
				plural(len(c.Providers), "provider"), plural(len(c.Integrations), "integration"), plural(ops, "operation")))
		}
	}
	var tools []string
	if mcpFile != "" {
		var err error
		if tools, err = toolServerNames(mcpFile); err != nil {
			fail(mcpFile, err, "fix the catalogue so it loads; serve refuses to start with it")
		} else {
			rep.Files = append(rep.Files, fmt.Sprintf("%s: %s", mcpFile, plural(len(tools), "MCP server")))
		}
	}
	if groundingFile != "" {
		var gcat grounding.Catalogue
		if cat != nil {
			gcat = cat.WithToolServers(tools...)
		}
		checkGroundingFile(rep, groundingFile, gcat, fail)
	}
	if policyFile != "" {
		pol, err := loadPolicyFile(policyFile) // as serve reads it: its owner and modes checked
		if err != nil {
			fail(policyFile, err, "fix the file so it loads; until then serve refuses every effect (policy-unreadable)")
		} else {
			rep.Files = append(rep.Files, fmt.Sprintf("%s: %s", policyFile, plural(len(pol.Matches()), "rule")))
			for _, cp := range pol.CardPatterns() {
				if want, ok := cardToolSpelling(cp.Pattern); ok {
					rep.Problems = append(rep.Problems, checkProblem{File: policyFile,
						Rule: fmt.Sprintf("agents %q %s", cp.Agent, cp.Key), Part: cp.Pattern,
						Problem: fmt.Sprintf("%q is how an MCP client shows the tool; card patterns match Gatehouse's name for it (SINK.ACTION, SERVER/TOOL), so this pattern matches nothing", cp.Pattern),
						Fix:     fmt.Sprintf("write %q", want)})
				}
			}
			if cat != nil {
				for _, p := range cat.CheckPolicy(pol) {
					rep.Problems = append(rep.Problems, checkProblem{File: policyFile,
						Rule: fmt.Sprintf("%s[%d] %q", p.Section, p.Index, p.Rule), Part: p.Part, Problem: p.Problem, Fix: p.Fix})
				}
			}
		}
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}

// checkGroundingFile loads the grounding rules as serve does and reports
// what each rule grounds, or every problem.
func checkGroundingFile(rep *checkReport, file string, cat grounding.Catalogue, fail func(string, error, string)) {
	rules, err := loadGroundingFile(file) // as serve reads it: its owner and modes checked
	if err != nil {
		fail(file, err, "fix the file so it loads; until then serve refuses every provider call")
		return
	}
	if cat == nil {
		fail(file, fmt.Errorf("not checked: the provider catalogue did not load"), "fix the catalogue first")
		return
	}
	probs := rules.CheckCatalogue(cat)
	for _, p := range probs {
		rep.Problems = append(rep.Problems, checkProblem{File: file, Rule: fmt.Sprintf("rule[%d] %q", p.Index, p.Rule),
			Part: p.Part, Problem: p.Problem, Fix: p.Fix})
	}
	if len(probs) > 0 {
		return
	}
	resolved, err := provider.LoadGrounding(file, cat) // the loader serve uses: this is what it would run with
	if err != nil {
		fail(file, err, "")
		return
	}
	rep.Files = append(rep.Files, fmt.Sprintf("%s: %s", file, plural(len(resolved.Resolved()), "rule")))
	for _, p := range resolved.Advice() {
		rep.Notes = append(rep.Notes, checkProblem{File: file, Rule: fmt.Sprintf("rule[%d] %q", p.Index, p.Rule), Part: p.Part, Problem: p.Problem, Fix: p.Fix})
	}
	for _, r := range resolved.Resolved() {
		g := checkGrounds{Rule: r.Rule, Operations: []string{}}
		for _, op := range r.Operations {
			g.Operations = append(g.Operations, op.String())
		}
		rep.Grounds = append(rep.Grounds, g)
	}
}

// writeReport writes v as indented JSON when asJSON is set, else calls
// text.
func writeReport(w io.Writer, asJSON bool, v any, text func()) error {
	if !asJSON {
		text()
		return nil
	}
	return writeJSON(w, v)
}

// toolServerNames lists the servers of the MCP catalogue at path ("" for
// none), loaded as serve loads it.
func toolServerNames(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	cat, err := mcpsink.LoadCatalogue(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cat.Servers))
	for i, s := range cat.Servers {
		names[i] = s.Name
	}
	return names, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func printPolicyCheck(w io.Writer, rep *checkReport) {
	for _, f := range rep.Files {
		fmt.Fprintln(w, f)
	}
	for _, g := range rep.Grounds {
		fmt.Fprintf(w, "  grounding rule %q grounds %s\n", g.Rule, strings.Join(g.Operations, "; "))
	}
	for _, p := range rep.Notes {
		printProblem(w, "note: ", p)
	}
	if rep.OK {
		fmt.Fprintln(w, "ok: no problems")
		return
	}
	for _, p := range rep.Problems {
		printProblem(w, "", p)
	}
	fmt.Fprintln(w, plural(len(rep.Problems), "problem"))
}

func printProblem(w io.Writer, prefix string, p checkProblem) {
	where := p.File
	if p.Rule != "" {
		where += ": " + p.Rule
	}
	if p.Part != "" {
		where += " " + p.Part
	}
	fmt.Fprintf(w, "%s%s: %s\n", prefix, where, p.Problem)
	if p.Fix != "" {
		fmt.Fprintf(w, "  fix: %s\n", p.Fix)
	}
}

// cardToolSpelling reports whether an agent card's tool pattern is
// written as Gatehouse's MCP server shows the tool to clients
// (mcpserver: "bank/transfer" is bank__transfer, "output.deliver" is
// output_deliver) rather than as cards match it, and what to write
// instead. A card written from what the agent's MCP client lists would
// otherwise allow, block or hold nothing, silently.
func cardToolSpelling(pat string) (string, bool) {
	if strings.ContainsAny(pat, "./") {
		return "", false
	}
	if server, tool, ok := strings.Cut(pat, "__"); ok && server != "" && tool != "" {
		return server + "/" + tool, true
	}
	if sink, action, ok := strings.Cut(pat, "_"); ok && action != "" && policy.KnownSink(policy.Sink(sink)) {
		return sink + "." + action, true
	}
	return "", false
}
