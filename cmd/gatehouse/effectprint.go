package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// maxResultShown bounds how much of a result the human output shows;
// --json has it all.
const maxResultShown = 4000

// printEffectResult prints, after the decision, what the effect gave back
// and what to do next: a program's exit code, stdout and stderr (code,
// process), any other sink's result as JSON, or the approval request an
// effect is held in. Everything an agent or a program chose is printed
// with control characters made visible (termSafe), never sent to the
// terminal as they are.
func printEffectResult(env *cliEnv, r *broker.EffectReply) {
	w := env.stdout
	if d := r.Decision; d != nil && d.Outcome == journal.OutcomeHeld {
		if d.Approval != "" {
			fmt.Fprintf(w, "  held for approval %s: a person decides it (gatehouse approve show %s, or the dashboard's Approvals page);\n"+
				"  propose the same effect again, unchanged, once it is approved\n", d.Approval, d.Approval)
			// Why it is held again, when it was decided before (an expired
			// approval, a rule that changed, one waiting for a person).
			if e := r.Error; e != nil && !strings.HasSuffix(e.Message, d.Approval) {
				fmt.Fprintf(w, "  why: %s\n", termSafe(e.Message))
			}
		}
		return
	}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		return
	}
	var prog struct {
		ExitCode  *int    `json:"exit_code"`
		Killed    string  `json:"killed"`
		Stdout    *string `json:"stdout"`
		Stderr    *string `json:"stderr"`
		Truncated bool    `json:"truncated"`
	}
	if json.Unmarshal(r.Result, &prog) == nil && prog.ExitCode != nil && (prog.Stdout != nil || prog.Stderr != nil) {
		line := fmt.Sprintf("  exit code %d", *prog.ExitCode)
		if prog.Killed != "" {
			line += ", killed: " + termSafe(prog.Killed)
		}
		if prog.Truncated {
			line += " (output truncated)"
		}
		fmt.Fprintln(w, line)
		for _, s := range []struct {
			name string
			text *string
		}{{"stdout", prog.Stdout}, {"stderr", prog.Stderr}} {
			if s.text == nil || *s.text == "" {
				continue
			}
			fmt.Fprintf(w, "  %s:\n", s.name)
			text, cut := clipText(*s.text, maxResultShown)
			for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", termSafe(l))
			}
			if cut {
				fmt.Fprintf(w, "    ... (%d bytes in all; --json has everything)\n", len(*s.text))
			}
		}
		return
	}
	var compact bytes.Buffer
	if json.Compact(&compact, r.Result) != nil {
		compact.Reset()
		compact.Write(r.Result)
	}
	text, cut := clipText(compact.String(), maxResultShown)
	fmt.Fprintf(w, "  result %s\n", termSafe(text))
	if cut {
		fmt.Fprintf(w, "  ... (%d bytes in all; --json has everything)\n", compact.Len())
	}
}

// effectExit is effect's exit status (see cmdDocs["effect"]): 0 allowed
// and done; 1 refused, failed, or not answered; 2 a request the broker
// could not take (bad params, an unknown sink); 3 held for approval. err is
// the client's error beside the reply; with --json the reply on stdout
// says it all, so nothing more is printed.
func effectExit(env *cliEnv, r *broker.EffectReply, err error, asJSON bool) error {
	quiet := func(code int, e error) error {
		if asJSON {
			return &exitError{code: code}
		}
		return &exitError{code: code, err: e}
	}
	switch {
	case r.Decision != nil && r.Decision.Outcome == journal.OutcomeHeld:
		return &exitError{code: exitHeld} // the approval id is the news, not a failure
	case err != nil:
		code := exitFindings
		var eb *broker.ErrorBody
		if errors.As(err, &eb) {
			switch eb.Code {
			case broker.CodeBadRequest, broker.CodeForbiddenField, broker.CodeUnknownSink, broker.CodeTooLarge, broker.CodeCredentialRefused:
				code = exitUsage
			}
		}
		return quiet(code, err)
	case r.Decision == nil:
		return quiet(exitFindings, errors.New("the broker answered without a decision"))
	case r.Decision.Outcome != journal.OutcomeAllowed:
		return &exitError{code: exitFindings} // the refusal and its reasons are printed above
	case r.Outcome != nil && r.Outcome.Status != "ok":
		why := r.Outcome.Status
		if r.Outcome.Error != "" {
			why += " (" + r.Outcome.Error + ")"
		}
		return quiet(exitFindings, fmt.Errorf("the effect was allowed and carried out, and it %s", termSafe(why)))
	}
	return nil
}

// clipText cuts s to at most max bytes at a rune boundary.
func clipText(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max], true
}

// termSafe shows every control and format character of s (escape
// sequences, carriage returns, bidirectional overrides) by its code point,
// so text an agent or a program chose cannot move the cursor, recolour or
// reorder what the terminal shows. Tabs are kept.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			fmt.Fprintf(&b, "\\u{%04x}", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	if r == '\t' {
		return false
	}
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf)
}
