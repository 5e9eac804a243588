// Package subject lists every NATS subject, stream and bucket name Gatehouse
// uses. They are versioned (gatehouse.v1) and form a contract with agents,
// applications and other Gatehouse processes: change one only with a new
// version prefix.
package subject

import (
	"strings"

	"github.com/gatehouse/gatehouse/policy"
)

const (
	// Prefix is the root of every Gatehouse subject of this version.
	Prefix = "gatehouse.v1"

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

	// BrokersHello is where brokers say they are here (broker.Fence), and
	// RunQuiesce where the one closing a run asks the others to finish
	// deciding for it. Only brokers may use either.
	BrokersHello = Prefix + ".ctl.brokers"
	RunQuiesce   = Prefix + ".ctl.quiesce"
)

// Identities.
//
// Every request an agent or an application makes names, in its subject,
// the identity that makes it, and the NATS server lets each credential
// publish only under its own identity (package broker/embedded sets those
// permissions; an operator of an external NATS sets the same, see
// embedded.Permissions). So the identity token the broker reads from a
// request's subject is one the server enforced, never a field anyone
// wrote:
//
//	gatehouse.v1.agent.<agent>.effect.<sink>    an agent proposes an effect
//	gatehouse.v1.agent.<agent>.peer.next        ... takes its next peer message
//	gatehouse.v1.app.<app>.work.open            an application opens work
//	gatehouse.v1.app.<app>.work.close           ... closes a run it opened
//	gatehouse.v1.app.<app>.approval.<op>        ... decides, lists, gets approvals
//
// and each identity reads replies only in its own inbox space, which no
// other identity's space contains:
//
//	_INBOX_agent.<agent>.>    _INBOX_app.<app>.>
//
// <agent> and <app> are a name (ValidName) or Shared, the identity of the
// shared "agent" and "app" credentials of the quick start. Shared starts
// with '_', which no name may, so it never stands for a named identity.
const (
	// Shared is the identity token of the shared agent credential and of
	// the shared app credential.
	Shared = "_shared"
	// Gatehouse is the application identity of work Gatehouse opens
	// itself (the browser's runtime run). No credential publishes as it
	// (Requester refuses it), so no application can close that work or
	// read its outputs.
	Gatehouse = "_gatehouse"

	// AgentPrefix is followed by an agent identity and what it asks.
	AgentPrefix = Prefix + ".agent"
	// AppPrefix is followed by an application identity and what it asks.
	AppPrefix = Prefix + ".app"

	// AgentInbox and AppInbox are followed by the identity token: each
	// identity's replies arrive under its own prefix (AgentInboxOf,
	// AppInboxOf).
	AgentInbox = "_INBOX_agent"
	AppInbox   = "_INBOX_app"
	// OpsInbox is the inbox space of Gatehouse's operator tools (gatehouse
	// status), which ask brokers for NATS micro stats; no agent or
	// application may read it.
	OpsInbox = "_INBOX_ops"

	// ProbeSubject is what a broker publishes on its replies connection at
	// start, to learn whether the server confines that connection to inbox
	// spaces (broker.ProbeReplies). No stream holds it and nothing
	// subscribes to it.
	ProbeSubject = Prefix + ".probe.replies"
)

// Journal returns the subject a run's journal events are published on.
func Journal(run string) string { return JournalPrefix + "." + run }

// Effect returns the subject agent requests an effect of sink on.
func Effect(agent string, s policy.Sink) string {
	return AgentPrefix + "." + agent + ".effect." + string(s)
}

// EffectsOf matches every effect subject of agent: what its credential may
// publish.
func EffectsOf(agent string) string { return AgentPrefix + "." + agent + ".effect.>" }

// Tools. An agent asks which tools it may be offered for a run, and waits
// for a person to decide an effect of the run held for approval;
// Gatehouse's MCP server uses both, and neither decides nor records
// anything:
//
//	gatehouse.v1.agent.<agent>.tools.list    {"run"}: the run's tools (broker.ToolsRequest)
//	gatehouse.v1.agent.<agent>.tools.wait    {"run", "approval", "timeout_ms"}: once a person decided
const (
	ToolsListOp = "tools.list"
	ToolsWaitOp = "tools.wait"
)

// AgentOp returns the subject agent asks op on (ToolsListOp, ...).
func AgentOp(agent, op string) string { return AgentPrefix + "." + agent + "." + op }

// AgentOpEndpoint is the subject a broker serves op on, for every agent
// identity.
func AgentOpEndpoint(op string) string { return AgentPrefix + ".*." + op }

// ToolsOf matches agent's tools subjects: what its credential may publish
// besides effects.
func ToolsOf(agent string) string { return AgentPrefix + "." + agent + ".tools.>" }

// EffectEndpoint is the subject a broker serves sink's effects on, for
// every agent identity; EffectEndpoint("*") is every sink's, the one the
// broker serves (it reads the sink from the subject's last token).
func EffectEndpoint(s policy.Sink) string { return AgentPrefix + ".*.effect." + string(s) }

// App request kinds, the tokens after gatehouse.v1.app.<app>.
const (
	WorkOpenOp       = "work.open"
	WorkCloseOp      = "work.close"
	ApprovalDecideOp = "approval.decide"
	ApprovalListOp   = "approval.list"
	ApprovalGetOp    = "approval.get"
)

// App returns the subject application app requests op on
// (WorkOpenOp, ...).
func App(app, op string) string { return AppPrefix + "." + app + "." + op }

// AppEndpoint is the subject a broker serves op on, for every application
// identity.
func AppEndpoint(op string) string { return AppPrefix + ".*." + op }

// WorkOpen is requested by application app to open work for a person; the
// reply carries the new run id. Agents may not publish here.
func WorkOpen(app string) string { return App(app, WorkOpenOp) }

// WorkClose is requested by application app to close a run it opened.
func WorkClose(app string) string { return App(app, WorkCloseOp) }

// Class is the kind of identity a request comes from.
type Class string

const (
	ClassAgent Class = "agent"
	ClassApp   Class = "app"
)

// Requester reads the identity a request subject names: its class, the
// identity token (a name or Shared) and what follows it ("effect.output",
// "work.open"). ok is false for any other subject, or a token that is
// neither a name nor Shared.
func Requester(subj string) (c Class, id, rest string, ok bool) {
	var tail string
	switch {
	case strings.HasPrefix(subj, AgentPrefix+"."):
		c, tail = ClassAgent, subj[len(AgentPrefix)+1:]
	case strings.HasPrefix(subj, AppPrefix+"."):
		c, tail = ClassApp, subj[len(AppPrefix)+1:]
	default:
		return "", "", "", false
	}
	id, rest, found := strings.Cut(tail, ".")
	if !found || rest == "" || !ValidIdentity(id) {
		return "", "", "", false
	}
	return c, id, rest, true
}

// InboxOf is the inbox prefix of identity id of class c: every reply to
// it is published under InboxOf(c, id) + ".".
func InboxOf(c Class, id string) string {
	if c == ClassApp {
		return AppInboxOf(id)
	}
	return AgentInboxOf(id)
}

// AgentInboxOf is the inbox prefix of agent identity id (a name or
// Shared): replies to it can be read with its credential and no other.
func AgentInboxOf(id string) string { return AgentInbox + "." + id }

// AppInboxOf is the inbox prefix of application identity id.
func AppInboxOf(id string) string { return AppInbox + "." + id }

// InInbox reports whether reply lies inside the inbox space prefix: it is
// prefix, a '.', and one or more non-empty tokens, with no wildcard
// character ('*', '>') and no white space or control character anywhere.
func InInbox(reply, prefix string) bool {
	if len(reply) <= len(prefix)+1 || !strings.HasPrefix(reply, prefix+".") {
		return false
	}
	rest := reply[len(prefix)+1:]
	if rest[0] == '.' || rest[len(rest)-1] == '.' || strings.Contains(rest, "..") {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c <= ' ' || c == '*' || c == '>' || c == 0x7f {
			return false
		}
	}
	return true
}

// Outputs. The output sink delivers a step's result on
//
//	gatehouse.v1.output.<app>.<run>
//
// where <app> is the application identity that opened the run's work, so
// an application's credential can read its own runs' outputs and no other
// application's.
const (
	// OutputPrefix is followed by an application identity and a run id.
	OutputPrefix = Prefix + ".output"
	// OutputStream keeps delivered outputs (subjects gatehouse.v1.output.>)
	// so a caller that was not listening can still read a run's results.
	OutputStream = "GATEHOUSE_OUTPUTS"
)

// Output returns the subject the outputs of run, opened by application
// app, are delivered on.
func Output(app, run string) string { return OutputPrefix + "." + app + "." + run }

// OutputsOf matches the outputs of every run application app opened.
func OutputsOf(app string) string { return OutputPrefix + "." + app + ".>" }

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
// <run> is the run the message is about: the sender's run for a send, the
// new sub-run (the recipient's to act in) for a delegation, the recipient's
// own run of the same work for a broadcast. Messages are stored in PeerStream
// (work-queue retention), one durable pull consumer per agent named by
// PeerConsumer, which only the broker creates and reads: an agent asks a
// broker for its next message (PeerNext).
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

// PeerNextOp is what an agent asks, after gatehouse.v1.agent.<agent>, for
// its next peer message: agents read their queue through Gatehouse, never
// from JetStream, since JetStream answers an API request, a fetch or an
// acknowledgement on whatever reply subject the requester names, and the
// server checks only the subject published to. So no agent credential
// holds any $JS permission.
const PeerNextOp = "peer.next"

// PeerNext is the subject named agent asks for its next peer message on
// (broker.PeerNextRequest); the shared agent credential has no peer
// messages and may not publish here.
func PeerNext(agent string) string { return AgentPrefix + "." + agent + "." + PeerNextOp }

// PeerNextEndpoint is the subject a broker serves PeerNext on, for every
// agent identity.
const PeerNextEndpoint = AgentPrefix + ".*." + PeerNextOp

// MaxAgentLen bounds an agent or application name used in subjects.
const MaxAgentLen = 64

// ValidName reports whether name can name an agent or an application: one
// subject token, a consumer name and a KV key part, 1 to MaxAgentLen ASCII
// letters, digits, '-' and '_', the first a letter or digit. Anything else
// ('.', '*', '>', spaces, non-ASCII) could change which subjects a message
// or permission covers, and a leading '_' is Gatehouse's (Shared), so
// both are refused.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxAgentLen || !alnum(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// ValidAgent reports whether name can name an agent (ValidName).
func ValidAgent(name string) bool { return ValidName(name) }

// ValidIdentity reports whether id is an identity token: a name or Shared.
func ValidIdentity(id string) bool { return id == Shared || ValidName(id) }

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

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
// signed with the deployment's key on App(app, ApprovalDecideOp) (an
// approval.SignedAssertion, a decision or a reconciliation; the reply
// carries the request) and reads requests on ApprovalListOp ({"states":
// [...], "tenant": "", "limit": 0}) and ApprovalGetOp ({"id": "ap_..."});
// agents may not use any of them, nor may an application bound to tenants.
const (
	// ApprovalsBucket is the JetStream KV bucket holding approval requests
	// and claims on the embedded default.
	ApprovalsBucket = "gatehouse_approvals"
)
