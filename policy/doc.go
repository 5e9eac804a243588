// Package policy decides whether one proposed effect may happen.
//
// It is pure decision logic: Decide takes a compiled Policy and an Input
// (mode, authority, effect, time) as values and returns a Decision value.
// It does no I/O, reads no clock and keeps no state, so any number of
// goroutines may share one Policy. Only Load touches the file system.
//
// # Fail closed
//
// A nil or zero Policy, a Policy from Unreadable, and an Input whose Mode is
// not "", off, report or strict all refuse every effect with
// RefusePolicyUnreadable, enforced. A rules file that cannot be read or
// compiled is an error from Load; the broker then keeps running with
// Unreadable(name, err). An empty rules file (nothing, comments only, null
// or {}) is an error too (ErrNoRules), since pointing Gatehouse at an empty
// file is most likely a mistake; write "rules: []" for a file with no rules.
//
// # Modes
//
//   - off: nothing is decided or recorded; every effect is allowed with no
//     reasons, whatever the policy (even a nil or unreadable one).
//   - report (the default; an empty Mode means report): what the person may
//     do (mandate and scopes) and an unreadable policy are enforced; every
//     other finding is recorded with Enforced false and the effect goes
//     through, its Decision naming the first finding strict mode would
//     enforce (Refusal and Rule, Enforced false).
//   - strict: every finding is enforced.
//
// # Order of checks
//
// Decide records findings in this order; Decision.Reasons lists all of
// them. The verdict is refuse if any enforced finding is a refusal (the
// first one names Refusal and Rule), else hold if an enforced finding is
// approval-missing, else allow.
//
//  1. Mandate (Authority.Mandate; enforced in report and strict).
//     MandateUnreadable refuses outright. Then each of these is a separate
//     outside-mandate finding: the mandate has expired (Now is at or after a
//     non-zero ExpiresAt, or Now is zero and the mandate has an expiry, which
//     cannot be checked and so counts as expired); Systems is not empty and
//     lacks the effect's system (Effect.Provider for a provider call and
//     for an MCP tool call, where it is the upstream server's name, else the
//     sink's name, e.g. "output"); Effects is not empty and lacks the
//     effect's class; Scopes is not empty and lacks a scope the effect
//     requires (step 2).
//  2. Scopes (the rules file's scopes.require; enforced in report and
//     strict). Every entry whose match matches requires its scope: a scope
//     the person does not hold (Authority.Scopes) is scope-missing. Each
//     limit of a matching entry names an Effect.Values entry, compared as an
//     exact decimal (math/big, never floating point): a value above the
//     limit, missing, or not a plain decimal number is over-scope-limit.
//     Decision.ScopesChecked lists the scopes required.
//  3. Agent cards (the rules file's agents; only when Authority.Agent is
//     set). An agent without a card is agent-unregistered. The tool is
//     Effect.Tool, or "<sink>.<action>". A blocked_tools match is
//     tool-blocked even if allowed_tools matches too; otherwise a non-empty
//     allowed_tools without a match is tool-not-allowed. A peer "delegate"
//     whose Recipient matches no non-empty allowed_delegations is
//     delegation-not-allowed. A require_approval_for match is
//     approval-missing, which strict mode turns into a hold
//     (VerdictHold) rather than a refusal. Absent or empty lists restrict
//     nothing. Card patterns use path.Match. Rule is "agent:<name>".
//  4. Deployment deny rules: for a provider call the first matching deny
//     rule of the rules section, else the first matching deny rule of the
//     effects section (which applies to every sink, provider calls
//     included) is deployment-rule, with Rule the rule's name. Only the first
//     match is recorded.
//  5. Built-in refusals, described in the next section.
//
// Deployment rules are indexed at load by provider (rules:) and by the
// literal first segment of their target globs (effects:), so many such
// rules cost about what one costs; rules without either are tried for every
// effect (index.go). The index never changes which rule matches first.
//
// # Built-in refusals
//
// Provider calls: ambiguous-request is a call whose sink found no one
// canonical form for it (Effect.Ambiguous: a path or body servers could
// read as another resource or value); it is enforced in report mode as in
// strict, like the person's own findings, since no rule's match can be
// trusted on such a request. mutation-without-atom is a POST, PUT, PATCH or
// DELETE without both Atom and Declared, whatever its origin.
// beyond-declared-effect is a method the declared effect does not allow:
// read and notify allow GET, HEAD, OPTIONS and POST; write all but DELETE;
// destructive all; an unknown declared class allows nothing.
//
// Contracts hold for every origin. A mutating call naming an integration
// (Atom and Declared) must match one of the operations of its Contract:
// outside-contract when it matches none, or when the Contract is nil (the
// integration declares no operations, so it may only read); for registry
// or model code (and any origin Gatehouse does not know) a nil Contract is
// unverified-model-code instead, as is a mutating call of such code naming
// no integration at all. A call a sandboxed program made (FromProgram) must
// also match the program's own ProgramContract: outside-contract when it
// does not; a nil ProgramContract (the program's code could not be read)
// is unverified-model-code for registry or model code. An operation
// matches when the method is equal (ignoring case) and the path, without
// its query, matches the template segment by segment, "{name}" standing
// for exactly one non-empty segment; paths are the canonical paths the
// sink sends, so one spelling of an operation is all a template needs.
// Decision.Verified reports a match of the integration's Contract, for any
// provider call with one.
//
// Code: unconfined-execution when the origin is not shipped, runtime or
// direct and the program is not Confined. Process: unconfined-execution when
// the origin is model (or one Gatehouse does not know); a host command never
// runs confined.
//
// Browser: browser-send-off-site for a "send" whose method is not GET, HEAD
// or OPTIONS (or that carries a body, Values[BrowserBodyBytes]), or for a
// "connect", to a Host other than PageHost (compared ignoring case; an
// empty PageHost matches no host); for a read (GET, HEAD) to such a host,
// browser-query-off-site when Values[BrowserQueryBytes] is over the browser
// section's max_off_site_query_bytes (0 by default: any query), else
// browser-data-off-site when its path, name or page-set header bytes are
// over their limits, or when off_site_reads is named (browser.go).
//
// MCP tool calls (sink mcp): ungrounded as for provider calls, when the
// grounding rule that matched the call has failures; tool-changed when Effect.Unpinned is set, the
// upstream tool's name, description or schemas differing from its pin (or
// never pinned). It is enforced in report mode too: what a tool does must
// not change under the operator, whatever the mode.
//
// Rule is the refusal's own name for built-ins, "mandate", "mandate.<field>"
// for the mandate, "scope:<scope>" for scopes, "policy" or "mode" for an
// unusable policy or mode.
//
// # What an allow rule lifts
//
// A rule whose decision is exactly "allow" lifts only these built-ins, and
// its name is then in Decision.Allowed so the journal records it with every
// effect it let through:
//   - mutation-without-atom, by the first matching allow rule in rules;
//   - unconfined-execution, by the first matching allow rule in effects;
//   - browser-send-off-site, browser-query-off-site and
//     browser-data-off-site, by the first matching allow rule in effects
//     that has a target.
//
// Nothing a deployment writes lifts a mandate or scope finding, a card
// finding, ambiguous-request, beyond-declared-effect, outside-contract or
// unverified-model-code, nor cancels a deny rule. Any decision other than
// "allow" (deny, Deny, block, or none at all) denies.
//
// # Rules file
//
// JSON or YAML, top-level sections rules, effects, scopes and agents; any
// other key, in any place, is an error. YAML aliases and merge keys are
// refused. Every rule needs a unique name and a non-empty match.
//
//	rules:                 # provider calls
//	  - name: no-deletes
//	    decision: deny
//	    match: {method: DELETE}
//	effects:               # every sink
//	  - name: ci-without-bubblewrap
//	    decision: allow
//	    match: {sink: code}
//	scopes:
//	  require:
//	    - scope: payments.write
//	      match: {provider: stripe, method: POST}
//	      limits: {amount: "1000"}
//	agents:
//	  - name: invoice-bot
//	    allowed_tools: ["provider.*"]
//	    require_approval_for: [provider.call]
//
// Match keys: rules take provider, atom, effect, method, code_origin and
// verified; effects take sink, action, origin, agent, target and confined;
// scopes take provider, atom, effect, method, code_origin, verified, sink,
// action, origin, agent, target, path and host. A value is one string or a
// non-empty list, matched if any element is equal; a match holds when every
// key written holds. method is compared ignoring case, host ignoring case;
// effect is the integration's declared effect (Effect.Declared);
// code_origin and origin both mean Effect.Origin; agent is
// Authority.Agent; verified and confined take true or false. target and path
// are globs with github.com/bmatcuk/doublestar/v4 semantics: "*" and "?" do
// not cross "/", a "**" path segment crosses any number of them, and
// "{a,b}" picks alternatives. So "api.example.com/*" matches
// "api.example.com/v1" but not "api.example.com/v1/x"; write
// "api.example.com/**" for everything under the host. For a provider
// call, path and target are the canonical request the sink sends (the
// path escaped as sent); when the provider routes paths without regard to
// case (Effect.PathFold) they match ignoring ASCII case.
//
// # Effect class
//
// The class a mandate's Effects is checked against is Effect.Class if set,
// else Effect.Declared, else from Effect.Method (GET, HEAD, OPTIONS: read;
// DELETE: destructive; any other: write), else from the sink:
//
//	output, peer                                   notify
//	browser                                        read
//	memory, artifact, workspace, code, process     write (also any other sink)
package policy
