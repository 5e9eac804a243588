package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/subject"
)

const approveUsage = `Usage:
  gatehouse approve list [--state S]... [--tenant T] [--limit N] [--json]
  gatehouse approve show ID [--json]
  gatehouse approve approve ID --key FILE --approver NAME --role R [--assurance mfa] [--reason TEXT]
  gatehouse approve refuse ID --key FILE --approver NAME --role R [--assurance mfa] --reason TEXT
  gatehouse approve reconcile ID --key FILE --approver NAME --happened=true|false --reason TEXT

The deployment backend's side of approvals, at a terminal: read the queue,
and approve, refuse or reconcile with an assertion signed by the backend's
Ed25519 private key (base64 seed or PEM 'ED25519 PRIVATE KEY') over the
request's exact action. The broker verifies it against --approval-key.
Exit status: 0 done, 1 refused by the broker (not allowed, already decided),
2 usage.
`

func cmdApprove(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, approveUsage, "--help", "-h"); done {
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
	fs := newEnvFlags(env, "approve "+sub, approveUsage)
	cf.register(fs)
	cf.registerApp(fs)
	fs.Var(&states, "state", "list: only these states (pending, approved, refused, claimed, settled, outcome_unknown, reconciled, reopened)")
	fs.StringVar(&tenant, "tenant", "", "list: only this tenant")
	fs.IntVar(&limit, "limit", 0, "list: at most this many, newest first")
	fs.stringVar(&key, "key", "", "the backend's Ed25519 private key file signing the assertion")
	fs.StringVar(&approver, "approver", "", "who decides (never the agent or the person the work is for)")
	fs.Var(&roles, "role", "the approver's roles")
	fs.StringVar(&assurance, "assurance", "mfa", "how the backend authenticated the approver: password, mfa, webauthn")
	fs.StringVar(&reason, "reason", "", "why")
	fs.BoolVar(&happened, "happened", false, "reconcile: did the action take effect?")
	rest, err := fs.parse(args[1:])
	if err != nil {
		return err
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
		if cf.json {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			for _, r := range append(rep.Requests, derefReq(rep.Request)...) {
				printRequest(env, &r, rep.Request != nil)
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
		raw, err := os.ReadFile(key)
		if err != nil {
			return usageError("--key: %v", err)
		}
		priv, err := approval.ParsePrivateKey(raw)
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
	return usageError("unknown approve command %q (list, show, approve, refuse, reconcile)", sub)
}

func derefReq(r *approval.Request) []approval.Request {
	if r == nil {
		return nil
	}
	return []approval.Request{*r}
}

func printRequest(env *cliEnv, r *approval.Request, full bool) {
	fmt.Fprintf(env.stdout, "%s  %-15s  %s.%s  run %s  for %s/%s  rule %s\n", r.ID, r.State, r.Sink, r.Action, r.Run, r.Tenant, r.Person, r.Rule)
	if !full {
		return
	}
	fmt.Fprintf(env.stdout, "  action %s\n  roles %s, least assurance %q\n", r.ActionDigest, strings.Join(r.Roles, ", "), r.Assurance)
	for _, a := range r.Arguments {
		fmt.Fprintf(env.stdout, "  %s = %s\n", a.Name, a.Value)
	}
	for _, c := range r.Checks {
		fmt.Fprintf(env.stdout, "  check: %s -> %s (%s) from %s\n", c.Change, c.Outcome, c.Rule, strings.Join(c.Records, ", "))
	}
	if d := r.Decision; d != nil {
		fmt.Fprintf(env.stdout, "  decided: approved=%v by %s (%s, %s) %s\n", d.Approved, d.Approver, d.Assurance, d.Authenticated, d.Reason)
	}
	if rc := r.Reconciled; rc != nil {
		fmt.Fprintf(env.stdout, "  reconciled: happened=%v by %s %s\n", rc.Happened, rc.By, rc.Reason)
	}
}
