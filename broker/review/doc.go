// Package review reads a journal and answers one question offline: what
// would strict mode have refused while the deployment ran in report mode
// (policy review, for operators). What agents did for one person (the
// evidence timeline, for reviewers and a tenant's auditors) is package
// evidence's Timeline; review reads run files with evidence's reader
// (evidence.EachRun).
//
// It is pure over the journal's files: it opens run files read-only, never
// writes, holds no state between calls and needs no keys or network. It
// does not verify the journal (journal.Verify does); a line that does not
// parse is counted in Skipped and otherwise ignored, so a review of a
// damaged journal says how much it could not read.
//
// # Policy review
//
// Review groups every finding a policy.decision recorded with Enforced
// false (what report mode let through and strict mode would refuse or hold)
// by refusal, rule and target. The target is what the decision touched,
// named for the sink: "provider METHOD host/path" for provider calls,
// "browser send host/path" for browser sends, the sink, action and target
// otherwise. Each group carries counts, first and last seen, example runs
// and Suggestions: what to do about it, with rule text in the rules file's
// own YAML where a rule can do it. Every suggestion that carries rule text
// has been checked: the text parses with policy.Parse and, decided in strict
// mode over the effect the journal recorded, turns that finding into an
// allow (or, for an approval, a hold). Suggestion.Checked says so; a
// suggestion whose check failed is dropped rather than shown.
package review
