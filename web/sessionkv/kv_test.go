package sessionkv_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
	"github.com/gatehouse/gatehouse/web"
	"github.com/gatehouse/gatehouse/web/sessionkv"
	"github.com/gatehouse/gatehouse/web/sessionredis"
	"github.com/gatehouse/gatehouse/web/statetest"
)

// Both stores serve keeps the dashboard's state in pass the one contract,
// on a real embedded nats-server and a real redis-server.
func TestStores(t *testing.T) {
	t.Run("jetstream-kv", func(t *testing.T) {
		st, err := sessionkv.Open(context.Background(), natstest.JetStream(t), "dashboard_test", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		statetest.Run(t, st)
	})
	t.Run("redis", func(t *testing.T) {
		url, stop, _ := sinktest.StartRedis(t)
		defer stop()
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		statetest.Run(t, sessionredis.New(rdb, sessionredis.Prefix))
	})
	t.Run("memory", func(t *testing.T) { statetest.Run(t, web.NewMemoryState(nil)) })
}

// BenchmarkSessionGet: what every signed-in request adds, reading its
// session record from the store: JetStream KV (embedded server,
// in-process connection) against Redis (loopback) and memory.
func BenchmarkSessionGet(b *testing.B) {
	val := []byte(`{"name":"rita","roles":["reviewer"],"stamp":"0011223344556677","assurance":"password","created":"2026-12-01T09:00:00Z","exp":"2026-12-01T21:00:00Z"}`)
	run := func(b *testing.B, st web.StateStore) {
		ctx := context.Background()
		if _, err := st.Create(ctx, "s.bench", val, time.Hour); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, _, err := st.Get(ctx, "s.bench"); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("jetstream-kv", func(b *testing.B) {
		st, err := sessionkv.Open(context.Background(), natstest.JetStream(b), "dashboard_bench", 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		run(b, st)
	})
	b.Run("redis", func(b *testing.B) {
		url, stop, _ := sinktest.StartRedis(b)
		defer stop()
		opt, _ := redis.ParseURL(url)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		run(b, sessionredis.New(rdb, sessionredis.Prefix))
	})
	b.Run("memory", func(b *testing.B) { run(b, web.NewMemoryState(nil)) })
}
