package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/approval/approvalredis"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// approvalFlags configure the approvals engine of serve.
type approvalFlags struct {
	key          string        // --approval-key FILE, or GATEHOUSE_APPROVAL_KEY
	claimTimeout time.Duration // --approval-claim-timeout
	life         time.Duration // --approval-life
}

func (a *approvalFlags) register(fs *flagSet) {
	fs.stringVar(&a.key, "approval-key", "", "the approvals backend's public key, verifying the decisions it signs: the .pub file gatehouse keygen wrote (or the key itself); without it every signed decision is refused")
	fs.DurationVar(&a.claimTimeout, "approval-claim-timeout", 5*time.Minute, "an approved action claimed and not settled for this long is marked OUTCOME_UNKNOWN for a person to reconcile")
	fs.DurationVar(&a.life, "approval-life", 24*time.Hour, "an approval stands this long unused: the approved action proposed later goes back to a person (reopened, \"the approval expired\"); 0 keeps approvals until their run closes")
}

// openApprovals opens the approval store (Redis with --redis-url, else
// JetStream KV) and the service recording into rec. A key that is named
// and cannot be read stops serve (fail closed); no key refuses every
// signed assertion.
func openApprovals(ctx context.Context, js jetstream.JetStream, redisURL string, replicas int, af approvalFlags,
	getenv func(string) string, rec broker.Journal, log *slog.Logger) (*approval.Service, error) {
	var pub ed25519.PublicKey
	if af.key != "" {
		k, err := loadOnePublicKey(af.key)
		if err != nil {
			return nil, usageError("--approval-key: %v", err)
		}
		pub = k
	}
	var store approval.Store
	if redisURL != "" {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return nil, usageError("--redis-url: %v", err)
		}
		store = approvalredis.New(redis.NewClient(opt), approvalredis.Prefix)
	} else {
		kv, err := approval.NewKVStore(ctx, js, subject.ApprovalsBucket, replicas)
		if err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		store = kv
	}
	return approval.New(store, rec, approval.Config{Logger: log, Key: pub, ClaimTimeout: af.claimTimeout}), nil
}
