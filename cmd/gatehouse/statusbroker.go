package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/gatehouse/gatehouse/broker"
)

// brokerFindings adds what a broker says of itself that an operator must
// act on: a policy that cannot be read refuses every effect (status used
// to say "ok" while it did), grounding rules that cannot be read refuse
// every provider call.
func brokerFindings(rep *statusReport, b *statusBroker) {
	st := b.Status
	if st == nil {
		return
	}
	if st.PolicyError != "" {
		rep.Findings = append(rep.Findings, fmt.Sprintf("broker %s cannot read its policy (%s): it refuses every effect (policy-unreadable) until the file is fixed and reloaded (kill -HUP, or the status page's Reload policy)",
			b.ID, st.PolicyError))
	}
	if st.GroundingError != "" {
		rep.Findings = append(rep.Findings, fmt.Sprintf("broker %s cannot read its grounding rules (%s): it refuses every provider call until they are fixed and reloaded",
			b.ID, st.GroundingError))
	}
}

// embeddedFigures fills the figures of the server status reached from
// what the broker running it reported, when no system account gave them.
func embeddedFigures(rep *statusReport) {
	for i := range rep.Servers {
		s := &rep.Servers[i]
		if s.Connections != nil {
			continue
		}
		for _, b := range rep.Brokers {
			if n := b.Status; n != nil && n.NATS != nil && n.NATS.Name == s.Name {
				s.Connections, s.Streams, s.Consumers, s.Uptime = &n.NATS.Connections, &n.NATS.Streams, &n.NATS.Consumers, n.NATS.Uptime
				if s.Version == "" {
					s.Version = n.NATS.Version
				}
				rep.Notes = dropNote(rep.Notes, noteNoSystemUser)
			}
		}
	}
}

// printBrokerStatus is the line under a broker: its mode and policy.
func printBrokerStatus(w io.Writer, st *broker.InstanceStatus) {
	if st == nil {
		return
	}
	pol := "built-in rules only"
	switch {
	case st.PolicyError != "":
		pol = "UNREADABLE: " + st.PolicyError
	case st.PolicyName != "":
		pol = st.PolicyName + " " + shortDigest(st.PolicyDigest)
	}
	fmt.Fprintf(w, "    mode %s, policy %s, %d sinks\n", st.Mode, pol, len(st.Sinks))
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// count is a figure, or "-" when it is not known.
func count(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

const noteNoSystemUser = "servers: pass --system-user (and $GATEHOUSE_SYSTEM_PASSWORD) to see every NATS server and the JetStream meta group"

func dropNote(notes []string, n string) []string {
	out := notes[:0]
	for _, x := range notes {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}
