package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/policy"
)

// RequestsBucket is the JetStream KV bucket holding, for each effect
// request an agent sent with a request_id, its claim and, once decided,
// the reply; key "<run>.<request_id>".
const RequestsBucket = "gatehouse_requests"

// RequestIDsConfig configures OpenRequestIDs. The zero value is useful.
type RequestIDsConfig struct {
	Replicas int           // 0 is 1
	TTL      time.Duration // how long an id is kept; 0 is 24 h
	// Lease is how long a claim may stay unchanged, before its decision is
	// recorded, until another broker may take the request over; 0 is 3 s.
	Lease time.Duration
	// Wait bounds how long a broker waits for another one to finish a
	// request it holds before answering REQUEST_IN_PROGRESS; 0 is 2 s
	// (under half a client's default 10 s, so its one retry gets that
	// answer rather than a TIMEOUT).
	Wait   time.Duration
	Logger *slog.Logger
}

// RequestIDs makes effect requests with a request_id decided at most once
// per run, across every broker sharing the bucket, while the id is kept
// (RequestIDsConfig.TTL). Safe for concurrent use.
//
// The protocol, one KV entry per request id:
//   - claimed: a broker created the entry (KV create is the claim: of two
//     brokers racing on an id exactly one succeeds) and has recorded
//     nothing yet. If the entry stays unchanged for the lease, the broker
//     is taken to be dead and another one takes the request over with a
//     compare-and-set on the entry's revision.
//   - recording: the claimant moved the entry here, with a compare-and-set
//     that fails if it was taken over, before it recorded the decision.
//     From here on the request is never decided again: another broker
//     waits for done and otherwise answers ErrRequestInProgress, since a
//     claimant that died now may or may not have recorded its decision.
//   - done: the reply is kept; the same request again is answered with it
//     (EffectReply.Replayed), a different request with ErrRequestIDReused.
//
// A request answered before recording anything (a bad request, a held
// effect the agent will propose again once approved) releases its claim,
// so sending it again decides it afresh.
type RequestIDs struct {
	kv    jetstream.KeyValue
	lease time.Duration
	wait  time.Duration
	log   *slog.Logger
}

// OpenRequestIDs creates or binds the request-id bucket.
func OpenRequestIDs(ctx context.Context, js jetstream.JetStream, cfg RequestIDsConfig) (*RequestIDs, error) {
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 3 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: RequestsBucket, Description: "gatehouse effect request ids: claims and recorded replies",
		TTL: cfg.TTL, History: 1, Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrRequestStore, RequestsBucket, err)
	}
	return &RequestIDs{kv: kv, lease: cfg.Lease, wait: cfg.Wait, log: cfg.Logger}, nil
}

type requestState string

const (
	requestClaimed   requestState = "claimed"
	requestRecording requestState = "recording"
	requestDone      requestState = "done"
)

type requestEntry struct {
	State  requestState `json:"state"`
	Digest string       `json:"digest"` // of the request, so a reuse is told apart
	Reply  *EffectReply `json:"reply,omitempty"`
}

// requestClaim is one broker's hold on a request id. Its methods are
// called by the one goroutine deciding the request.
type requestClaim struct {
	ids    *RequestIDs
	key    string
	digest string
	rev    uint64
	state  requestState
	lost   bool // taken over by another broker
}

// claim claims req's id, or returns the reply to answer with instead:
// the recorded one, or an error reply. The digest that tells a reuse apart
// covers the sink as well as the request (after admit: the established
// origin), so the same bytes proposed to another sink are a reuse.
func (r *RequestIDs) claim(ctx context.Context, run string, sink policy.Sink, req *EffectRequest) (*requestClaim, *EffectReply) {
	canon, _ := json.Marshal(struct {
		Sink policy.Sink `json:"sink"`
		*EffectRequest
	}{sink, req})
	sum := sha256.Sum256(canon)
	c := &requestClaim{ids: r, key: run + "." + req.RequestID, digest: "sha256:" + hex.EncodeToString(sum[:]), state: requestClaimed}
	claimed, _ := json.Marshal(requestEntry{State: requestClaimed, Digest: c.digest})
	until := time.Now().Add(r.wait)
	var seenRev uint64
	var seenAt time.Time
	// A store error (a timeout on a loaded server, a stream leader being
	// elected) is tried again until the wait is over: nothing was claimed
	// or decided yet.
	storeErr := func(err error) *EffectReply {
		if time.Now().After(until) || ctx.Err() != nil {
			return errorReply(run, fmt.Errorf("%w: %v", ErrRequestStore, err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return nil
	}
	for {
		rev, err := r.kv.Create(ctx, c.key, claimed)
		if err == nil {
			c.rev = rev
			return c, nil
		}
		if !kvcas.Conflict(err) {
			if rep := storeErr(err); rep != nil {
				return nil, rep
			}
			continue
		}
		for {
			e, err := r.kv.Get(ctx, c.key)
			if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
				break // released: claim it
			}
			if err != nil {
				if rep := storeErr(err); rep != nil {
					return nil, rep
				}
				continue
			}
			var ent requestEntry
			if err := json.Unmarshal(e.Value(), &ent); err != nil {
				return nil, errorReply(run, fmt.Errorf("%w: entry %s is not JSON: %v", ErrRequestStore, c.key, err))
			}
			if ent.Digest != c.digest {
				return nil, errorReply(run, fmt.Errorf("%w: %s", ErrRequestIDReused, req.RequestID))
			}
			now := time.Now()
			switch ent.State {
			case requestDone:
				if ent.Reply == nil {
					return nil, errorReply(run, fmt.Errorf("%w: entry %s holds no reply", ErrRequestStore, c.key))
				}
				rep := *ent.Reply
				rep.Replayed = true
				return nil, &rep
			case requestClaimed:
				if e.Revision() != seenRev {
					seenRev, seenAt = e.Revision(), now
				} else if now.Sub(seenAt) >= r.lease {
					rev, err := r.kv.Update(ctx, c.key, claimed, seenRev)
					if err == nil {
						r.log.Warn("request taken over from a broker that recorded nothing within the lease", "run", run, "request_id", req.RequestID)
						c.rev = rev
						return c, nil
					}
					seenRev = 0 // changed meanwhile: look again
					continue
				}
			}
			if now.After(until) && ent.State != requestClaimed || ctx.Err() != nil {
				return nil, errorReply(run, fmt.Errorf("%w: %s is %s", ErrRequestInProgress, req.RequestID, ent.State))
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// recording moves the claim to recording before the decision is recorded;
// it fails with ErrRequestInProgress when another broker took it over.
func (c *requestClaim) recording(ctx context.Context) error {
	b, _ := json.Marshal(requestEntry{State: requestRecording, Digest: c.digest})
	rev, err := c.ids.kv.Update(ctx, c.key, b, c.rev)
	if err != nil {
		if kvcas.Conflict(err) {
			c.lost = true
			return fmt.Errorf("%w: another broker took it over while this one was slow", ErrRequestInProgress)
		}
		return fmt.Errorf("%w: %v", ErrRequestStore, err)
	}
	c.rev, c.state = rev, requestRecording
	return nil
}

// settle keeps reply as the request's answer once its decision was
// (or may have been) recorded, and releases the claim otherwise.
func (c *requestClaim) settle(reply *EffectReply) {
	if c == nil || c.lost {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	held := reply.Decision != nil && reply.Decision.Outcome == "held"
	if c.state != requestRecording || held {
		if err := c.ids.kv.Delete(ctx, c.key, jetstream.LastRevision(c.rev)); err != nil {
			c.ids.log.Warn("request id not released; it is refused as in progress until it expires", "key", c.key, "err", err)
		}
		return
	}
	b, err := json.Marshal(requestEntry{State: requestDone, Digest: c.digest, Reply: reply})
	if err == nil {
		_, err = c.ids.kv.Update(ctx, c.key, b, c.rev)
	}
	if err != nil {
		c.ids.log.Error("reply of a request id not kept; proposing it again answers REQUEST_IN_PROGRESS", "key", c.key, "err", err)
	}
}

// requestSlot carries a request's claim from propose back to Propose,
// which settles it with the final reply.
type requestSlot struct{ claim *requestClaim }

// claimRequest claims req's id into slot when it has one and this broker
// keeps ids; a non-nil reply is the answer instead of deciding.
func (b *Broker) claimRequest(ctx context.Context, slot *requestSlot, run string, sink policy.Sink, req *EffectRequest) *EffectReply {
	if req.RequestID == "" || b.requests == nil {
		return nil
	}
	c, rep := b.requests.claim(ctx, run, sink, req)
	slot.claim = c
	return rep
}

// recording moves the request's claim, if any, to recording.
func (s *requestSlot) recording(ctx context.Context) error {
	if s.claim != nil {
		return s.claim.recording(ctx)
	}
	return nil
}
