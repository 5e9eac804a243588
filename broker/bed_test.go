package broker_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// brokerBed is a strict broker with the output sink on an embedded NATS
// (its store in dir/nats), serving an application and an agent. Its
// journal and its sink are the test's: journalFor gets the broker's
// JetStream, sinkFor the output sink to wrap.
type brokerBed struct {
	js         jetstream.JetStream
	b          *broker.Broker
	app, agent *client.Client
}

func newBrokerBed(t *testing.T, dir string, journalFor func(jetstream.JetStream) broker.Journal, sinkFor func(*output.Sink) broker.Sink) *brokerBed {
	t.Helper()
	ns := startEmbedded(t, dir)
	b, nc, js := strictBroker(t, ns, journalFor, sinkFor)
	app, agent := serveAndDial(t, ns, dir, nc, b)
	return &brokerBed{js: js, b: b, app: app, agent: agent}
}

// serveAndDial serves b's requests on nc and dials the shared application
// and agent of ns (its store in dir/nats); all are closed at cleanup.
func serveAndDial(t *testing.T, ns *embedded.Server, dir string, nc *nats.Conn, b *broker.Broker) (app, agent *client.Client) {
	t.Helper()
	svc, err := broker.Serve(nc, b, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	creds := func(r embedded.Role) string { return embedded.CredsPath(filepath.Join(dir, "nats"), r) }
	if app, err = client.Dial(ns.URL, client.App, creds(embedded.RoleApp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	if agent, err = client.Dial(ns.URL, client.Agent, creds(embedded.RoleAgent)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	return app, agent
}

// strictBroker is a strict broker with the output sink on its own
// connection to ns (the journal stream and run bucket made if missing),
// its journal and its sink the test's.
func strictBroker(t *testing.T, ns *embedded.Server, journalFor func(jetstream.JetStream) broker.Journal, sinkFor func(*output.Sink) broker.Sink) (*broker.Broker, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Stop)
	out, err := output.New(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Mode: policy.ModeStrict}, runs, journalFor(js), policy.Default(), sinkFor(out))
	if err != nil {
		t.Fatal(err)
	}
	return b, nc, js
}
