// Package subject lists every NATS subject, stream and bucket name Gatehouse
// uses. They are versioned (gatehouse.v1) and form a contract with agents,
// applications and other Gatehouse processes: change one only with a new
// version prefix.
package subject

import "github.com/gatehouse/gatehouse/policy"

const (
	// Prefix is the root of every Gatehouse subject of this version.
	Prefix = "gatehouse.v1"

	// WorkOpen is requested by an application to open work for a person;
	// the reply carries the new run id. Agents may not publish here.
	WorkOpen = Prefix + ".work.open"
	// WorkClose is requested by an application to close a run.
	WorkClose = Prefix + ".work.close"

	// EffectPrefix is followed by the sink name: gatehouse.v1.effect.output.
	// Agents request effects here.
	EffectPrefix = Prefix + ".effect"
	// EffectAll matches every effect subject.
	EffectAll = EffectPrefix + ".>"

	// OutputPrefix is followed by a run id; the output sink delivers a
	// step's result there for the caller and later steps to read.
	OutputPrefix = Prefix + ".output"

	// JournalPrefix is followed by a run id. Brokers publish journal
	// events here into the JournalStream; only brokers may publish.
	JournalPrefix = Prefix + ".journal"
	// JournalAll matches every journal subject.
	JournalAll = JournalPrefix + ".>"

	// JournalStream is the JetStream stream carrying journal events from
	// brokers to the journal writer.
	JournalStream = "GATEHOUSE_JOURNAL"
	// JournalConsumer is the journal writer's durable consumer.
	JournalConsumer = "journal-writer"

	// RunsBucket is the JetStream KV bucket holding each run's record
	// (whom the work is for), keyed by run id.
	RunsBucket = "gatehouse_runs"

	// ServiceName is the NATS micro service name (nats micro ls).
	ServiceName = "gatehouse"
	// QueueGroup is the queue group brokers share, so many can run at once.
	QueueGroup = "gatehouse-brokers"
)

// Effect returns the subject agents request an effect of sink on.
func Effect(s policy.Sink) string { return EffectPrefix + "." + string(s) }

// Output returns the subject a run's outputs are delivered on.
func Output(run string) string { return OutputPrefix + "." + run }

// Journal returns the subject a run's journal events are published on.
func Journal(run string) string { return JournalPrefix + "." + run }

// Inbox prefixes. Applications and agents connect with their own
// credentials and may subscribe only to their own inbox space, so neither
// can read the other's replies.
const (
	AppInbox   = "_INBOX_app"
	AgentInbox = "_INBOX_agent"
)

// OutputStream keeps delivered outputs (subjects gatehouse.v1.output.>) so
// a caller that was not listening can still read a run's results.
const OutputStream = "GATEHOUSE_OUTPUTS"
