package code_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestUnconfinedCodeRunsAsASandboxUID: where the only tier is unconfined
// and a rule lifts unconfined-execution, model code runs as a uid of the
// sandbox range with no capability, never as the broker (root here), and
// sees no other process; the outcome records the uid.
func TestUnconfinedCodeRunsAsASandboxUID(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "effects:\n  - name: ci-without-sandbox\n    decision: allow\n    match: {sink: code}\n", sinks(unconfined))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, request(run, policy.OriginModel, `
import os
print(os.getuid(), os.getgid(), os.getgroups())
print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])
print(len([p for p in os.listdir('/proc') if p.isdigit()]))
`))
	if err != nil || r.Outcome == nil || r.Decision.AllowedBy != "ci-without-sandbox" {
		t.Fatalf("%v %+v", err, r)
	}
	out := reply(t, r)
	f := strings.Fields(out.Stdout)
	if len(f) != 5 {
		t.Fatalf("stdout %q stderr %q", out.Stdout, out.Stderr)
	}
	uid, _ := strconv.Atoi(f[0])
	procs, _ := strconv.Atoi(f[4])
	if uid < sandbox.DefaultFirstUID || uid >= sandbox.DefaultFirstUID+sandbox.DefaultUIDCount || f[1] != f[0] || f[2] != "[]" ||
		f[3] != "0000000000000000" || procs < 1 || procs > 2 || out.Confined {
		t.Fatalf("unconfined code ran as %q", out.Stdout)
	}
	evs := env.Events(t, run)
	var res journal.Result
	_ = json.Unmarshal(evs[len(evs)-1].Data, &res)
	if res.Detail["uid"] != f[0] || res.Detail["separate_uid"] != "true" || res.Detail["tier"] != "unconfined" {
		t.Fatalf("outcome detail %+v", res.Detail)
	}
}
