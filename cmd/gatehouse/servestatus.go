package main

import (
	"github.com/nats-io/nats-server/v2/server"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
)

// instanceStatus adds what serve knows beyond its broker to the status the
// broker reports in its micro stats (broker.InstanceStatus), which
// `gatehouse status` shows: why the grounding rules refuse every provider
// call, and, with the embedded NATS server, that server's own figures
// (connections, uptime, streams, consumers), which no client can read
// from it without a system account.
func instanceStatus(ns *embedded.Server, pols *policyHolder) func(*broker.InstanceStatus) {
	return func(st *broker.InstanceStatus) {
		if err := pols.groundingError(); err != nil {
			st.GroundingError = err.Error()
		}
		if ns == nil || ns.NS == nil {
			return
		}
		s := &broker.ServerStatus{Name: ns.NS.Name(), Version: server.VERSION}
		if v, err := ns.NS.Varz(nil); err == nil {
			s.Connections, s.Uptime = v.Connections, v.Uptime
		}
		if j, err := ns.NS.Jsz(nil); err == nil {
			s.Streams, s.Consumers = j.Streams, j.Consumers
		}
		st.NATS = s
	}
}
