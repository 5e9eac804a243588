package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// explainFindings turns a failed verify's JSON report into what a person
// needs to find the cause: for each finding in a run, the run's events
// around it (type, time, effect), and every line of the brokers' and the
// writer's logs naming those effects or the run's close. A fault test
// that fails once in many runs must say why the first time.
func (d *deployment) explainFindings(report string) string {
	var rep struct {
		Findings []struct {
			Kind, Run string
			Seq       int
		}
	}
	if json.Unmarshal([]byte(report), &rep) != nil {
		return ""
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Run == "" || f.Seq == 0 || seen[f.Run] {
			continue
		}
		seen[f.Run] = true
		raw, err := os.ReadFile(filepath.Join(d.jdir, "runs", f.Run+".jsonl"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		fmt.Fprintf(&b, "\nrun %s around event %d (%s):\n", f.Run, f.Seq, f.Kind)
		names := []string{f.Run + `","type":"run.close`, "closing a run while"}
		for i := max(0, f.Seq-6); i < min(len(lines), f.Seq+4); i++ {
			e, err := journal.ParseLine([]byte(lines[i] + "\n"))
			if err != nil {
				fmt.Fprintf(&b, "  %d: unreadable: %v\n", i+1, err)
				continue
			}
			fmt.Fprintf(&b, "  %d: %s %s effect=%s id=%s\n", i+1, e.Time.Format("15:04:05.000"), e.Type, e.Effect, e.ID)
			if e.Effect != "" {
				names = append(names, e.Effect)
			}
		}
		logs := map[string]string{}
		if d.writer != nil {
			logs["writer"] = d.writer.Output()
		}
		for i, s := range d.brokers {
			logs[fmt.Sprintf("broker %d", i)] = s.out.String()
		}
		for who, out := range logs {
			for _, ln := range strings.Split(out, "\n") {
				for _, n := range names {
					if strings.Contains(ln, n) || strings.Contains(ln, "doubt") || strings.Contains(ln, "out of order") || strings.Contains(ln, "gap in the stream") {
						fmt.Fprintf(&b, "  [%s] %s\n", who, tail(ln, 400))
						break
					}
				}
			}
		}
	}
	return b.String()
}
