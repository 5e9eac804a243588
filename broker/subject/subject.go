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

// Buckets of the artifact and memory sinks on the embedded default.
const (
	// ArtifactBucket is the JetStream Object Store holding published
	// artifacts, named "<tenant>/<key>" so tenants never share a name.
	ArtifactBucket = "gatehouse_artifacts"
	// MemoryBucket is the JetStream KV bucket holding memories, keyed by
	// visibility, tenant, person (private only) and key, each hex-encoded.
	MemoryBucket = "gatehouse_memory"
)

// Buckets of the code sink's registry of stored integrations.
const (
	// IntegrationsBucket is the JetStream KV bucket holding each stored
	// integration's entry (program, declared effect, source digest,
	// contract), keyed by its name.
	IntegrationsBucket = "gatehouse_integrations"
	// IntegrationCodeBucket is the JetStream Object Store holding stored
	// integrations' sources, named by their SHA-256.
	IntegrationCodeBucket = "gatehouse_integration_code"
)

// Peer messages (the peer sink). Every message to an agent, whatever its
// kind, is published on that agent's own subject, so an agent reads one
// place and NATS permissions can keep agents apart by subject:
//
//	gatehouse.v1.peer.<agent>.<run>
//
// <run> is the run the recipient acts in for this message: the sender's run
// for a send, the new sub-run for a delegation, the recipient's own run of
// the same work for a broadcast. Messages are stored in PeerStream
// (work-queue retention), one durable pull consumer per agent named by
// PeerConsumer, which only the broker creates; agents fetch from it.
const (
	// PeerPrefix is followed by an agent name and a run id. Only brokers
	// publish here, as the peer sink's decided effect.
	PeerPrefix = Prefix + ".peer"
	// PeerAll matches every peer subject.
	PeerAll = PeerPrefix + ".>"
	// PeerStream keeps peer messages until the recipient acknowledges
	// them, so an agent that was not listening still gets them.
	PeerStream = "GATEHOUSE_PEER"
	// PeerBucket is the JetStream KV bucket listing which runs and agents
	// take part in a piece of work (the peers a broadcast reaches), keyed
	// "<root run>.<run>.<agent>".
	PeerBucket = "gatehouse_peers"
	// PeerConsumerPrefix is followed by the agent name.
	PeerConsumerPrefix = "peer_"
)

// Peer returns the subject a message to agent, acting in run, is published
// on. agent must satisfy ValidAgent.
func Peer(agent, run string) string { return PeerPrefix + "." + agent + "." + run }

// PeerFilter matches every message to agent.
func PeerFilter(agent string) string { return PeerPrefix + "." + agent + ".>" }

// PeerConsumer names agent's durable consumer on PeerStream.
func PeerConsumer(agent string) string { return PeerConsumerPrefix + agent }

// AgentInboxOf is the inbox prefix of an agent connecting with its own
// credential: replies to it can be read with that credential and no other
// agent's.
func AgentInboxOf(agent string) string { return AgentInbox + "." + agent }

// MaxAgentLen bounds an agent name used in subjects.
const MaxAgentLen = 64

// ValidAgent reports whether name can stand as one subject token, a
// consumer name and a KV key part: 1 to MaxAgentLen ASCII letters, digits,
// '-' and '_'. Anything else ('.', '*', '>', spaces, non-ASCII) could
// change which subjects a message or permission covers, so it is refused.
func ValidAgent(name string) bool {
	if name == "" || len(name) > MaxAgentLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Buckets of the provider sink on the embedded default.
const (
	// CredentialsBucket is the JetStream KV bucket holding provider
	// credentials, keyed by tenant, person and provider, each
	// hex-encoded. Only brokers may read it.
	CredentialsBucket = "gatehouse_credentials"
	// GroundingBucket is the JetStream KV bucket holding the provider
	// responses grounding may rely on and the paths a workflow wrote to,
	// keyed by workflow, provider and path, each hex-encoded, so every
	// broker process sees what any of them read.
	GroundingBucket = "gatehouse_grounding"
)

// Approvals. An application's backend (app credentials) submits decisions
// signed with the deployment's key on ApprovalDecide and reads requests on
// ApprovalList and ApprovalGet; agents may not use any of them.
const (
	ApprovalPrefix = Prefix + ".approval"
	// ApprovalDecide takes an approval.SignedAssertion (a decision or a
	// reconciliation) and replies with the request.
	ApprovalDecide = ApprovalPrefix + ".decide"
	// ApprovalList takes {"states": [...], "tenant": "", "limit": 0}.
	ApprovalList = ApprovalPrefix + ".list"
	// ApprovalGet takes {"id": "ap_..."}.
	ApprovalGet = ApprovalPrefix + ".get"
	// ApprovalsBucket is the JetStream KV bucket holding approval requests
	// and claims on the embedded default.
	ApprovalsBucket = "gatehouse_approvals"
)
