package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/web"
	"github.com/gatehouse/gatehouse/web/sessionkv"
	"github.com/gatehouse/gatehouse/web/sessionredis"
)

// dashboardFlags are serve's flags for the web dashboard.
type dashboardFlags struct {
	cookieSecure string
	hosts        string // comma-separated
	proxies      string // comma-separated
}

func (d *dashboardFlags) register(fs *flagSet) {
	fs.stringVar(&d.cookieSecure, "cookie-secure", "auto", "mark the dashboard's cookies Secure: auto (when the request came over TLS, or a proxy in front says X-Forwarded-Proto: https), on, or off")
	fs.stringVar(&d.hosts, "http-host", "", "names the dashboard answers to besides IP addresses and localhost (comma-separated), e.g. the name a proxy serves it under; other Host headers are refused (DNS rebinding)")
	fs.stringVar(&d.proxies, "http-trusted-proxy", "", "addresses (IP or CIDR, comma-separated) of proxies whose X-Forwarded-For names the client, for sign-in throttling per address")
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// webConfig checks the dashboard flags and puts them into cfg.
func (d *dashboardFlags) webConfig(cfg *web.Config) error {
	cs, err := web.ParseCookieSecure(d.cookieSecure)
	if err != nil {
		return usageError("--cookie-secure: %v", err)
	}
	cfg.CookieSecure = cs
	cfg.Hosts = splitList(d.hosts)
	cfg.TrustedProxies = splitList(d.proxies)
	for _, p := range cfg.TrustedProxies {
		if err := web.ParseTrustedProxy(p); err != nil {
			return usageError("--http-trusted-proxy: %v", err)
		}
	}
	return nil
}

// dashboardSessionTTL is how long a dashboard session lasts (web's
// default); the KV bucket keeps values this long after their last write.
const dashboardSessionTTL = 12 * time.Hour

// openDashboardState opens where the dashboard keeps sessions and sign-in
// state: Redis with --redis-url (the keys under sessionredis.Prefix), else
// the JetStream KV bucket subject.DashboardBucket, so a restart signs no
// one out and several serve processes behind one address share it.
func openDashboardState(ctx context.Context, js jetstream.JetStream, redisURL string, replicas int) (web.StateStore, error) {
	if redisURL != "" {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return nil, usageError("--redis-url: %v", err)
		}
		return sessionredis.New(redis.NewClient(opt), sessionredis.Prefix), nil
	}
	st, err := sessionkv.Open(ctx, js, subject.DashboardBucket, replicas, dashboardSessionTTL+time.Hour)
	if err != nil {
		return nil, fmt.Errorf("dashboard sessions: %w", err)
	}
	return st, nil
}

// policyByDigest finds the policy a decision was made under: the one in
// force, or one kept in the content store (DATA_DIR/content, full capture),
// for policy review's advice. nil when neither has it.
func policyByDigest(dataDir string, current func() *policy.Policy) func(string) *policy.Policy {
	return func(digest string) *policy.Policy {
		if p := current(); p != nil && p.Digest() == digest {
			return p
		}
		dir := filepath.Join(dataDir, "content")
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
		st, err := content.Open(dir, content.Options{})
		if err != nil {
			return nil
		}
		defer st.Close()
		b, err := st.Get(digest)
		if err != nil {
			return nil
		}
		p, err := policy.Parse("policy.yaml", b)
		if err != nil {
			return nil
		}
		return p
	}
}
