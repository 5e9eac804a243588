package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/dashboard/reveal"
)

const approveUsage = `Usage:
  gatehouse approve list [--state S]... [--tenant T] [--limit N] [--json]
  gatehouse approve show ID [--json]
  gatehouse approve approve ID --key FILE --approver NAME --role R [--assurance mfa] [--reason TEXT]
  gatehouse approve refuse ID --key FILE --approver NAME --role R [--assurance mfa] --reason TEXT
  gatehouse approve reconcile ID --key FILE --approver NAME --role R [--assurance mfa] --happened=true|false --reason TEXT

The deployment backend's side of approvals, at a terminal: read the queue,
and approve, refuse or reconcile with an assertion signed by the backend's
private key over the request's exact action; the broker verifies it
against serve --approval-key. Make the pair with 'gatehouse keygen --out
backend.key': backend.key goes to --key here, backend.pub to serve
--approval-key.
Reconciling needs the standing approving does: one of the rule's roles
and at least its assurance. Arguments are printed as the dashboard shows
them: hidden, bidirectional and control characters by code point.
`

func cmdApprove(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "approve", approveUsage); done {
		return err
	}
	var (
		cf                               connFlags
		states                           listFlag
		roles                            listFlag
		tenant, key, approver, assurance string
		reason                           string
		limit                            int
		happened                         bool
	)
	sub := args[0]
	if !slices.Contains([]string{"list", "show", "approve", "refuse", "reconcile"}, sub) {
		return unknownSubcommand("approve", sub, "list", "show", "approve", "refuse", "reconcile")
	}
	fs := newEnvFlags(env, "approve "+sub, approveUsage)
	cf.register(fs)
	cf.registerApp(fs)
	fs.Var(&states, "state", "list: only these states (pending, approved, refused, claimed, settled, outcome_unknown, reconciled, reopened)")
	fs.StringVar(&tenant, "tenant", "", "list: only this tenant")
	fs.IntVar(&limit, "limit", 0, "list: at most this many, newest first")
	fs.stringVar(&key, "key", "", "the backend's private key file signing the assertion (gatehouse keygen --out backend.key; serve --approval-key takes backend.pub)")
	fs.StringVar(&approver, "approver", "", "who decides (never the agent or the person the work is for)")
	fs.Var(&roles, "role", "the approver's roles")
	fs.StringVar(&assurance, "assurance", "mfa", "how the backend authenticated the approver: password, mfa, webauthn")
	fs.StringVar(&reason, "reason", "", "why")
	fs.BoolVar(&happened, "happened", false, "reconcile: did the action take effect?")
	rest, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	// What the broker would refuse as a malformed query or assertion is a
	// usage error here, said before dialing.
	for _, s := range states {
		if !approval.State(s).Known() {
			return usageError("--state %q is not a state: pending, approved, refused, claimed, settled, outcome_unknown, reconciled or reopened", s)
		}
	}
	if limit < 0 || limit > 10000 {
		return usageError("--limit must be 0 (all) to 10000, not %d", limit)
	}
	if !slices.Contains([]string{"password", "mfa", "webauthn"}, assurance) {
		return usageError("--assurance %q: how the backend authenticated the approver is password, mfa or webauthn", assurance)
	}
	if sub == "list" && len(rest) > 0 {
		return usageError("approve list takes no arguments (filter with --state and --tenant)")
	}
	if sub != "list" && len(rest) != 1 {
		return usageError("approve %s takes one request id", sub)
	}
	c, err := cf.dial(client.App)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	call := func(op string, in any) (*broker.ApprovalReply, error) {
		return c.Approval(ctx, op, in)
	}
	show := func(rep *broker.ApprovalReply) error {
		if cf.json && sub == "list" && rep.Error == nil {
			// A list is {"requests": [...]} even when empty, so
			// jq '.requests[]' reads every answer.
			_ = printJSON(env, approvalList{Requests: append([]approval.Request{}, rep.Requests...)})
		} else if cf.json {
			_ = printJSON(env, rep)
		} else {
			for _, r := range append(rep.Requests, derefReq(rep.Request)...) {
				printRequest(env, &r, rep.Request != nil)
			}
			if sub == "list" && len(rep.Requests) == 0 && rep.Error == nil {
				fmt.Fprintln(env.stdout, noRequests(states, tenant))
			}
		}
		if rep.Error != nil {
			if !cf.json {
				fmt.Fprintln(env.stderr, "gatehouse:", rep.Error.Error())
			}
			return &exitError{code: exitFindings}
		}
		return nil
	}
	one := func() (string, error) {
		if len(rest) != 1 {
			return "", usageError("approve %s takes one request id", sub)
		}
		return rest[0], nil
	}
	switch sub {
	case "list":
		ss := make([]approval.State, len(states))
		for i, s := range states {
			ss[i] = approval.State(s)
		}
		rep, err := call(subject.ApprovalListOp, broker.ApprovalQuery{States: ss, Tenant: tenant, Limit: limit})
		if err != nil {
			return err
		}
		return show(rep)
	case "show":
		id, err := one()
		if err != nil {
			return err
		}
		rep, err := call(subject.ApprovalGetOp, broker.ApprovalQuery{ID: id})
		if err != nil {
			return err
		}
		return show(rep)
	case "approve", "refuse", "reconcile":
		id, err := one()
		if err != nil {
			return err
		}
		if key == "" || approver == "" {
			return usageError("--key and --approver are required")
		}
		priv, err := loadPrivateKeyFile(key, nil)
		if err != nil {
			return usageError("--key: %v", err)
		}
		got, err := call(subject.ApprovalGetOp, broker.ApprovalQuery{ID: id})
		if err != nil {
			return err
		}
		if got.Error != nil || got.Request == nil {
			return show(got)
		}
		a := approval.Assertion{Kind: "decision", ID: id, ActionDigest: got.Request.ActionDigest, Approved: sub == "approve",
			Approver: approver, Roles: roles, Assurance: assurance, Reason: reason, Time: time.Now().UTC()}
		if sub == "reconcile" {
			a.Kind, a.Approved, a.Happened = "reconcile", false, happened
		}
		sa, err := a.Sign(priv)
		if err != nil {
			return err
		}
		rep, err := call(subject.ApprovalDecideOp, sa)
		if err != nil {
			return err
		}
		return show(rep)
	}
	return unknownSubcommand("approve", sub, "list", "show", "approve", "refuse", "reconcile")
}

// approvalList is what approve list --json prints.
type approvalList struct {
	Requests []approval.Request `json:"requests"`
}

func derefReq(r *approval.Request) []approval.Request {
	if r == nil {
		return nil
	}
	return []approval.Request{*r}
}

// printRequest prints a request for a person. Every string an agent or
// provider could have chosen goes through reveal, so a bidi override or a
// terminal escape in an argument is shown by code point, never acted on.
func printRequest(env *cliEnv, r *approval.Request, full bool) {
	l := reveal.Line
	fmt.Fprintf(env.stdout, "%s  %-15s  %s.%s  run %s  for %s/%s  rule %s\n", r.ID, r.State, l(r.Sink), l(r.Action), l(r.Run), l(r.Tenant), l(r.Person), l(r.Rule))
	if !full {
		if len(r.Arguments) > 0 {
			fmt.Fprintf(env.stdout, "  %s\n", argSummary(r.Arguments, 120))
		}
		return
	}
	need := strings.Join(r.Roles, ", ")
	if need == "" {
		need = "any reviewer"
	}
	if r.Assurance != "" {
		need += ", assurance at least " + r.Assurance
	}
	fmt.Fprintf(env.stdout, "  action %s\n  who may approve: %s\n", r.ActionDigest, l(need))
	for _, a := range r.Arguments {
		shown, _, dup := reveal.Value(a.Value)
		lines := strings.Split(shown, "\n")
		fmt.Fprintf(env.stdout, "  %s = %s\n", l(a.Name), l(lines[0]))
		for _, more := range lines[1:] {
			fmt.Fprintf(env.stdout, "      %s\n", l(more))
		}
		if notes := reveal.Notes(a.Value); len(notes) > 0 {
			fmt.Fprintf(env.stdout, "      (shown with hidden characters made visible: %s)\n", strings.Join(notes, "; "))
		}
		if dup != "" {
			fmt.Fprintf(env.stdout, "      (the key %s occurs twice in one object: programs may read either)\n", l(dup))
		}
	}
	for _, c := range r.Checks {
		recs := make([]string, len(c.Records))
		for i, x := range c.Records {
			recs[i] = l(x)
		}
		fmt.Fprintf(env.stdout, "  check: %s -> %s (%s) from %s\n", l(c.Change), l(c.Outcome), l(c.Rule), strings.Join(recs, ", "))
	}
	// A reopened request's earlier decisions no longer count; the person
	// asked again sees who said what before, and when, so an expired
	// approval (--approval-life) is not mistaken for a request never seen.
	for _, d := range r.Previous {
		fmt.Fprintf(env.stdout, "  set aside: approved=%v by %s (%s, %s) %s, at %s\n", d.Approved, l(d.Approver), l(d.Assurance), l(d.Authenticated), l(d.Reason), d.Time.UTC().Format(time.RFC3339))
	}
	if d := r.Decision; d != nil {
		fmt.Fprintf(env.stdout, "  decided: approved=%v by %s (%s, %s) %s\n", d.Approved, l(d.Approver), l(d.Assurance), l(d.Authenticated), l(d.Reason))
	}
	if rc := r.Reconciled; rc != nil {
		fmt.Fprintf(env.stdout, "  reconciled: happened=%v by %s %s\n", rc.Happened, l(rc.By), l(rc.Reason))
	}
}

// noRequests says what an empty list means: nothing in the states asked
// for (pending and reopened by default), or nothing at all.
func noRequests(states []string, tenant string) string {
	what := "no approval requests"
	if len(states) > 0 {
		what += " in state " + strings.Join(states, ", ")
	}
	if tenant != "" {
		what += " for tenant " + tenant
	}
	return what
}

// argSummary is the arguments on one line, revealed and cut to max.
func argSummary(as []approval.Argument, max int) string {
	parts := make([]string, len(as))
	for i, a := range as {
		shown, kind, _ := reveal.Value(a.Value)
		if kind == "json" {
			shown = a.Value
		}
		parts[i] = a.Name + "=" + shown
	}
	return reveal.Short(strings.Join(parts, " "), max)
}
