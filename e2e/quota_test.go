package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// TestServeTenantQuotas: through gatehouse serve and gatehouse effect, an
// agent's memory puts under one tenant stop at --memory-quota-mb with
// QUOTA_EXCEEDED (exit 1) and nothing stored, in the KV bucket itself;
// another tenant goes on; the budget holds across a serve restart, and a
// delete makes room again. The same for artifacts, --artifact-quota-mb.
func TestServeTenantQuotas(t *testing.T) {
	data := t.TempDir()
	s := serve(t, data, "--memory-quota-mb", "1", "--artifact-quota-mb", "1")
	as := func(args ...string) []string { return append(args, "--data-dir", data) }
	open := func(tenant string) string {
		return strings.TrimSpace(gh(t, as("work", "open", "--tenant", tenant, "--person", "ada")...).stdout)
	}
	value := strings.Repeat("m", 60000)
	put := func(run, key string) result {
		return gh(t, as("effect", "memory", "--run", run, "--action", "put", "--params", `{"key":"`+key+`","value":"`+value+`"}`)...)
	}
	// The store itself: the tenant's counter and a memory's presence.
	kv := func(s *server) jetstream.KeyValue {
		nc, err := nats.Connect(s.ep.NATSURL, seedOpt(t, embedded.CredsPath(filepath.Join(data, "nats"), embedded.RoleBroker)))
		must(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		must(t, err)
		kv, err := js.KeyValue(context.Background(), subject.MemoryBucket)
		must(t, err)
		return kv
	}
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	counter := func(kv jetstream.KeyValue) int64 {
		e, err := kv.Get(context.Background(), "q."+hx("acme"))
		must(t, err)
		n, err := strconv.ParseInt(string(e.Value()), 10, 64)
		must(t, err)
		return n
	}
	stored := func(kv jetstream.KeyValue, key string) bool {
		_, err := kv.Get(context.Background(), "p."+hx("acme")+"."+hx("ada")+"."+hx(key))
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	run := open("acme")
	n := 0
	var refused result
	for ; n < 40; n++ {
		if refused = put(run, fmt.Sprintf("k%d", n)); refused.code != 0 {
			break
		}
	}
	want(t, refused, 1, "QUOTA_EXCEEDED", "--memory-quota-mb", "memory delete")
	if n != 17 { // 1 MiB holds 17 memories of 60 kB with their records and keys
		t.Fatalf("refused at put %d", n)
	}
	store := kv(s)
	if c := counter(store); c > 1<<20 || c < 17*60000 || stored(store, fmt.Sprintf("k%d", n)) {
		t.Fatalf("counter %d; refused memory stored: %v", c, stored(store, fmt.Sprintf("k%d", n)))
	}
	want(t, put(open("globex"), "k0"), 0)

	// Artifacts: 100 kB of base64 a publish (the most one argument
	// carries), so 1 MiB holds 13.
	content := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 75000)))
	publish := func(run, key string) result {
		return gh(t, as("effect", "artifact", "--run", run, "--action", "publish", "--params", `{"key":"`+key+`","content":"`+content+`"}`)...)
	}
	a := 0
	for ; a < 40; a++ {
		if refused = publish(run, fmt.Sprintf("r/%d", a)); refused.code != 0 {
			break
		}
	}
	want(t, refused, 1, "QUOTA_EXCEEDED", "--artifact-quota-mb", "artifact delete")
	if a != 13 {
		t.Fatalf("artifact refused at publish %d", a)
	}
	ledger := func(s *server) int64 {
		nc, err := nats.Connect(s.ep.NATSURL, seedOpt(t, embedded.CredsPath(filepath.Join(data, "nats"), embedded.RoleBroker)))
		must(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		must(t, err)
		kv, err := js.KeyValue(context.Background(), subject.ArtifactBucket+"_quota")
		must(t, err)
		e, err := kv.Get(context.Background(), hx("acme"))
		must(t, err)
		var l struct {
			Used int64 `json:"used"`
		}
		must(t, json.Unmarshal(e.Value(), &l))
		return l.Used
	}
	if l := ledger(s); l > 1<<20 || l < 13*75000 {
		t.Fatalf("artifact ledger %d", l)
	}
	want(t, publish(open("globex"), "r/0"), 0)

	s.stop(t)
	s = serve(t, data, "--memory-quota-mb", "1", "--artifact-quota-mb", "1")
	want(t, publish(run, fmt.Sprintf("r/%d", a)), 1, "QUOTA_EXCEEDED")
	want(t, gh(t, as("effect", "artifact", "--run", run, "--action", "delete", "--params", `{"key":"r/0"}`)...), 0)
	want(t, publish(run, fmt.Sprintf("r/%d", a)), 0)
	if l := ledger(s); l > 1<<20 {
		t.Fatalf("artifact ledger %d past the budget", l)
	}
	store = kv(s)
	want(t, put(run, fmt.Sprintf("k%d", n)), 1, "QUOTA_EXCEEDED")
	want(t, gh(t, as("effect", "memory", "--run", run, "--action", "get", "--params", `{"key":"k0"}`)...), 0, value[:100])
	want(t, gh(t, as("effect", "memory", "--run", run, "--action", "delete", "--params", `{"key":"k0"}`)...), 0)
	want(t, put(run, fmt.Sprintf("k%d", n)), 0)
	if !stored(store, fmt.Sprintf("k%d", n)) || stored(store, "k0") {
		t.Fatal("the store does not hold what the puts and the delete said")
	}
	if c := counter(store); c > 1<<20 {
		t.Fatalf("counter %d past the budget", c)
	}
}
