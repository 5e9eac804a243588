package broker

import (
	"slices"

	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/policy"
)

// InstanceStatus is what one broker instance says of itself in its NATS
// micro stats ($SRV.STATS.gatehouse, the data of its "effect" endpoint),
// so `gatehouse status` can tell an operator what no request count shows:
// the mode, whether the policy in force could be read (an unreadable one
// refuses every effect), and, from the process around the broker
// (ServiceConfig.Status), the grounding rules' state and the embedded NATS
// server's own figures.
type InstanceStatus struct {
	Mode         policy.Mode `json:"mode"`
	PolicyName   string      `json:"policy_name,omitempty"`
	PolicyDigest string      `json:"policy_digest,omitempty"`
	// PolicyError is why the policy in force refuses every effect
	// (policy-unreadable), "" when it could be read.
	PolicyError string `json:"policy_error,omitempty"`
	// GroundingError is why every provider call is refused (grounding
	// rules that cannot be read), "" when none.
	GroundingError string   `json:"grounding_error,omitempty"`
	Sinks          []string `json:"sinks"`
	// EffectErrors is how many effect replies of this broker carried an
	// error code since it started (a policy refusal is a decision, not an error).
	EffectErrors int64 `json:"effect_errors"`
	// NATS is the embedded NATS server's figures, for a broker that runs
	// one (serve without --nats-url); nil otherwise.
	NATS *ServerStatus `json:"embedded_nats,omitempty"`
}

// ServerStatus is a NATS server's figures as `gatehouse status` shows
// them.
type ServerStatus struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Connections int    `json:"connections"`
	Uptime      string `json:"uptime"`
	Streams     int    `json:"streams"`
	Consumers   int    `json:"consumers"`
}

// instanceStatus is b's status, with what status adds.
func (b *Broker) instanceStatus(add func(*InstanceStatus)) *InstanceStatus {
	p := b.Policy()
	st := &InstanceStatus{Mode: b.mode, PolicyName: p.Name(), PolicyDigest: p.Digest(), PolicyError: p.Problem(),
		EffectErrors: b.effectErrors.Load()}
	for _, s := range b.Sinks() {
		st.Sinks = append(st.Sinks, string(s))
	}
	slices.Sort(st.Sinks)
	if add != nil {
		add(st)
	}
	return st
}

// statsHandler gives the effect endpoint's stats the instance's status.
func (s *Service) statsHandler(add func(*InstanceStatus)) micro.StatsHandler {
	return func(e *micro.Endpoint) any {
		if e.Name != effectEndpoint {
			return nil
		}
		return s.b.instanceStatus(add)
	}
}
