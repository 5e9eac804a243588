// Package opabench measures Gatehouse's policy.Decide against the Open
// Policy Agent on the same deployment rules and the same inputs. It holds
// nothing but this comment and _test.go files, so OPA is a test dependency
// only and never reaches the shipped binary.
//
// The OPA side is given its best form: one generated Rego rule per
// deployment rule in one ordered else chain (Rego has no "first match
// wins"), prepared once with PrepareForEval and evaluated with a pre-built
// ast.Value through EvalParsedInput. Target globs use glob.match with "/"
// as the only delimiter, which agrees with Gatehouse's doublestar matching
// for patterns without "**" (the generated rule sets use none).
//
//	go test -run '^$' -bench . -benchtime 2s ./policy/opabench/
//
// BenchmarkRatio reports OPA's mean time per decision over Gatehouse's;
// TestSameDecisions checks both engines decide alike, so the comparison is
// between equal work.
package opabench
