// Package broker is Gatehouse's gate: it takes an agent's proposal of one
// effect, establishes who is asking and what Gatehouse holds as fact about
// it, decides under the policy, records the decision durably, hands an
// allowed effect to the sink where it happens, records the outcome and
// answers. Applications open and close the work effects belong to; the
// approval endpoints let their backends decide held effects.
//
// # The flow of one effect
//
//	NATS request on gatehouse.v1.agent.<agent>.effect.<sink>, reply in _INBOX_agent.<agent>.>
//	Service.dispatch  who asks: the subject's identity token; the reply must lie in its inbox, else dropped
//	Broker.Propose
//	  DecodeEffectRequest   strict JSON; fields that would say whom work is for refused by name
//	  runs.Get              the run record the application wrote
//	  admit                 the caller must be the run's agent; origin and tool are Gatehouse's
//	  lineage, request id   a closed work refuses; a request_id is decided at most once per run
//	  Sink.Describe         the effect exactly as it will be carried out
//	  policy.Decide         mandate and scopes, agent card, built-in and deployment rules
//	  record decision       with the attempt, as one record, durable before anything happens
//	                        (strict: not durable, no effect; record.go)
//	  Sink.Perform
//	reply                   only to the requester's own inbox; the outcome is recorded behind it
//
// Durable means what the Journal given to New says: a Committed journal
// returns once the record is fsynced in the journal of the writer in this
// process (group-committed with every effect recorded at that moment: the
// single-node shape); a Recorder once the journal stream acknowledged it
// (a quorum of its replicas on a cluster). Run records come from a cache
// a watch on the runs bucket keeps fresh (runswatch.go), so the lookup and
// the lineage checks cost no round trip.
//
// Propose is also called in process by sinks that propose on Gatehouse's
// behalf (Internal): the code sink's gateway for a sandboxed program's
// provider calls, the provider sink's grounding rereads, the browser's
// sends and screenshots. They pass the origin they established as a
// parameter, never in a request field.
//
// # Who is asking: identity from NATS
//
// Every request names its identity in its subject, and the NATS server lets
// each credential publish only under its own token (package
// broker/embedded sets those permissions on the embedded server; an
// operator of an external NATS installs the same with `gatehouse agents
// nats-conf`). So the identity the Service reads is one the server
// enforced, not one anybody wrote: agent bob may publish only
// gatehouse.v1.agent.bob.effect.>, the shared agent credential only
// gatehouse.v1.agent._shared.effect.>, application crm only
// gatehouse.v1.app.crm.>. (subject.Requester parses it; the shared token
// begins with '_', which no name may.)
//
// Per-identity subjects were chosen over NATS accounts with service imports
// (whose requester info names the importing account and user): they work
// the same on the embedded server, on a plain cluster and on any
// nats-server a deployment already runs, with permissions alone, no
// operator/JWT setup or account per identity; they keep every Gatehouse
// subject in one account, so JetStream streams, KV buckets and the micro
// service (`nats micro ls`) stay where they are; and the identity is
// visible in the subject, so NATS permissions, logs and traces all show
// who asked. The cost is one effect endpoint subject with wildcards for the
// identity and the sink (subject.EffectEndpoint("*")): the broker reads
// both from the subject, and answers a sink it does not serve with
// UNKNOWN_SINK rather than leaving the request without a responder.
//
// # Where replies go
//
// A reply goes only to a reply subject inside the requester's own inbox
// space (subject.InboxOf: _INBOX_agent.<id>.> or _INBOX_app.<id>.>; no
// space contains another). A request with any other reply subject is not
// handled at all: nothing is decided, nothing is answered; it is logged and
// counted (gatehouse_replies_refused_total). That is the code's check; the
// structure behind it is that the Service answers on a connection the
// server lets publish only into inbox spaces (embedded.RoleReplies,
// verified at start by ProbeReplies), while streams, buckets, peer queues
// and outputs are written on the broker's other connection, which never
// answers a request. A reply aimed at a stream, a bucket or another run's
// subject is therefore refused by the server even if the check failed.
//
// The broker is not the only thing on NATS that answers: JetStream answers
// every API request, fetch and acknowledgement, and NATS micro every
// discovery request, on the reply subject the requester named, with rights
// of their own, and the server never checks a reply subject. So no agent
// or application credential may publish any $JS or $SRV subject
// (embedded.Permissions): an agent reads its peer messages through the
// broker (PeerNextRequest on subject.PeerNext, served from the sink's
// PeerQueue, answered like any reply), and discovery is the operator's.
//
// # Where each fact of a request comes from
//
// None of the facts a decision depends on is taken from what an agent
// sends. The audit of every field of an effect request:
//
//	field              source of the fact the broker uses
//	-----------------  ---------------------------------------------------------------
//	(identity)         the subject's token, enforced by NATS permissions (above)
//	run                a reference only: the run record is the application's, and
//	                   admit refuses (run-of-another-agent, recorded in that run)
//	                   unless the caller is the identity the run was opened for
//	                   (RunAgent; a sub-run's is its delegate). A run id alone
//	                   grants nothing. The run records the registration of its
//	                   agent the broker knew at open (Run.Incarnation, from the
//	                   identity register, see broker/identity): an agent removed
//	                   and registered again under the name is refused there the
//	                   same way, and a peer message, stamped by the sending
//	                   broker with its recipient's registration
//	                   (PeerMessage.Incarnation), is discarded, not handed to
//	                   another registration. No clock is compared.
//	acting_for, tenant, person, mandate, scopes, agent, input
//	                   refused by name (FORBIDDEN_FIELD); they come from the run record
//	origin             Gatehouse's: model for agent credentials unless the deployment
//	                   declares the identity's origin (identity register: gatehouse
//	                   agents add NAME --origin O, serve --agents NAME=O); a sink's
//	                   own for Internal proposals. A request may repeat it; naming
//	                   another is refused (origin-not-established, recorded). Sinks
//	                   see only the established origin in EffectRequest.Origin.
//	tool               Gatehouse's: "<sink>.<action>", which agent cards match. A
//	                   request naming another is refused (tool-not-established):
//	                   an agent could otherwise slip past blocked_tools. Sinks see
//	                   it cleared and the policy derives it.
//	action             the agent's choice of what to do, not authority: it selects
//	                   the sink's operation, is described and decided as such
//	(approval)         bound to sink, action, run and params as JSON values
//	                   (key order aside), and to what the sink resolved beyond
//	                   them; params with two keys equal after case folding
//	                   (which encoding/json reads as one, the last written,
//	                   so their order would pick what runs) cannot be bound,
//	                   and are refused rather than put to a person
//	request_id         the agent's idempotency key, scoped to the run (so to the
//	                   run's own agent, since admit runs first: no identity can claim
//	                   or poison another run's request ids) and bound to the sink
//	                   and the admitted request: the same id with other bytes or
//	                   for another sink is REQUEST_ID_REUSED, never a replay
//	params             the sink's arguments, decoded strictly by the sink, which
//	                   builds the Effect from what will actually happen:
//	  provider          method, host, path, body values: the canonical request the
//	                    sink will send; atom: the agent names an integration of the
//	                    catalogue, whose declared effect and contract are the
//	                    catalogue's (a declared effect the request repeats must be
//	                    the catalogue's); with the established origin model, a
//	                    shipped or runtime integration's contract does not apply,
//	                    so such an agent cannot borrow an integration's trust;
//	                    operation_id: the provider's idempotency key for the call,
//	                    not authority; credential: the person's, looked up after
//	                    the decision from the run record
//	  process, code     the program as resolved on the host (path, configured
//	                    program); confined: the sandbox's self-test, never a field;
//	                    integration: a stored entry, run as registry code or as
//	                    the origin of the work that stored it, whichever is
//	                    trusted less (a model's stored code stays model code);
//	                    found only from the tenant whose work stored it (or an
//	                    operator's), replaced only by that tenant's work of an
//	                    origin no less trusted; an approval binds the source
//	                    the name resolved to (Proposal.Resolved)
//	  workspace, artifact, memory
//	                    path, key, visibility: the target decided; tenant and
//	                    person (which namespace) from the run record; an
//	                    export's target is its most restricted path, so a
//	                    batch meets every rule a path of it would alone
//	  peer              to: the recipient decided (cards' allowed_delegations,
//	                    effects rules); the sender named in the message is the
//	                    sending run's record; a sub-run copies the parent's record
//	  output            status: the target decided; the subject delivered on is the
//	                    run's opening application's (subject.Output)
//	  browser           target, host and page host from the browser and its proxy;
//	                    sends are proposed by the browser only (Internal)
//	  mcp               server and tool select a catalogued server and a tool of
//	                    its pin: the sink sets Effect.Tool and Target to
//	                    "<server>/<tool>" (what cards match; the agent's tool
//	                    field is still refused), Provider to the server (the
//	                    mandate's system) and Class from the catalogue or the
//	                    pin, never from the arguments; arguments: decided as a
//	                    whole (approvals bind them, grounding checks them);
//	                    credential: the person's, after the decision
//
// Origin is the identity's in a sub-run too: a model agent may delegate to
// an agent the deployment declared shipped (cards' allowed_delegations
// limit to whom; empty is anyone), and that agent then proposes as shipped
// on a task the model wrote. Declare an origin only for an agent that does
// not act on what its peers' messages ask, or list the recipients each
// model agent may delegate to.
//
// An agent's peer.next (PeerNextRequest: wait_ms alone) names nothing: the
// queue read is the subject's identity's own (a named agent; the shared
// credential has none, NOT_RUN_AGENT), and a message's sender and run are
// the sending run's record.
//
// The agent's tools requests (gatehouse.v1.agent.<id>.tools.list and
// .tools.wait, tools.go) decide and record nothing; their run must be the
// caller's own (RunAgent, else NOT_RUN_AGENT, not recorded since nothing
// was proposed), and a wait names an approval id that must belong to that
// run (else APPROVAL_NOT_FOUND, whether or not it exists elsewhere). Each
// agent identity has at most four waits waiting on a broker, each at most
// MaxApprovalWait; past that TOO_MANY_WAITS, counted, not recorded.
//
// For applications the same holds: who opens and closes work is the
// subject's application identity. What an application's requests carry is
// its word, which is the point of an application: OpenWork's tenant,
// person, mandate, scopes, input and agent (a name, checked only for form:
// work may be opened for an agent not yet registered, and the first agent
// registered under that name acts in it; work opened for a name while it
// is removed is the next registration's), bounded only by the tenants the
// register binds it to; CloseWork's run must be one it opened; approval
// list, get and decide (unbound applications only) read across tenants,
// and a decision takes effect only as an assertion signed with the
// deployment's approval key. A run records it (Run.App): only that
// application may close the run (NOT_RUN_APPLICATION) and read its outputs
// (its own output subjects); an application the register binds to tenants
// opens work only for them (TENANT_NOT_ALLOWED) and may not use the
// approval endpoints, which span tenants. An application can never propose
// an effect; an agent can never open work.
//
// # Choices made where the issue was silent
//
//   - Caller refusals (origin-not-established, tool-not-established,
//     run-of-another-agent) are enforced in every mode: report mode reports
//     what policy would refuse, and these are not policy. They are recorded
//     as a policy.decision of rule journal.RuleIdentity against the run the
//     request named, with no request content (nothing to replay). In mode
//     off they are refused and not recorded; in a closed run too, whose
//     journal ends at run.close (verify reports any event after it as
//     tampering, which anyone knowing the run id could otherwise cause).
//     Repeated ones of a kind are recorded within a budget and the rest
//     counted in a summarising record (refusalflood.go), so knowing a run
//     id does not let anyone grow its journal without bound.
//   - A run opened without an agent accepts only the shared agent
//     credential; a named agent acts only on runs opened for it.
//   - A request dropped for its reply subject is not decided: deciding and
//     performing an effect whose reply must be thrown away would let an
//     agent act without the broker ever being able to tell it the outcome.
//   - On an external NATS whose replies credential is not confined, serve
//     logs an error at start and relies on the code's check; the embedded
//     server always confines it, or serve does not start.
package broker
