package memory_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestOpenKVUpgradesTheBucket: a memory bucket made before quotas (no
// marker TTL) is updated in place by OpenKV, memories kept, and a delete
// then works.
func TestOpenKVUpgradesTheBucket(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", nil)
	ctx := sinktest.Ctx(t)
	kv, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subject.MemoryBucket, Storage: jetstream.FileStorage, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := memory.Key{Tenant: "acme", Name: "old"}
	if _, err := kv.Put(ctx, kvKeyOf(k), []byte(`{"kind":"fact","value":1}`)); err != nil {
		t.Fatal(err)
	}
	st, err := memory.OpenKV(ctx, env.JS, memory.KVConfig{})
	if err != nil {
		t.Fatalf("OpenKV over a bucket from before quotas: %v", err)
	}
	if _, err := st.Get(ctx, k); err != nil {
		t.Fatalf("the old memory: %v", err)
	}
	if ok, err := st.Delete(ctx, k); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if u, err := st.Used(ctx, "acme"); err != nil || u != 0 {
		t.Fatalf("Used = %d, %v after deleting all", u, err)
	}
}
