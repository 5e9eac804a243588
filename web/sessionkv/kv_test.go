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
