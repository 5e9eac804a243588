package broker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCreateLimitedStreamOnASmallStore: on a JetStream that may store 64
// MiB, a stream asking the default 1 GiB bound is made with the largest
// halving that fits (not refused, so serve starts on a small disk), and
// its bound still holds; on enough storage the bound asked is taken.
func TestCreateLimitedStreamOnASmallStore(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		JetStreamMaxStore: 64 << 20, JetStreamMaxMemory: 16 << 20, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, Storage: jetstream.FileStorage}
	DefaultStreamLimits.Apply(&cfg)
	if _, err := js.CreateStream(ctx, cfg); err == nil {
		t.Fatal("the store took a 1 GiB bound it cannot hold; the test proves nothing")
	}
	got, err := CreateLimitedStream(ctx, js, cfg)
	if err != nil {
		t.Fatalf("a smaller bound: %v", err)
	}
	if got > 64<<20 || got < MinStreamBytes {
		t.Fatalf("bound %d, want at most the 64 MiB store and at least %d", got, MinStreamBytes)
	}
	st, err := js.Stream(ctx, "SMALL")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.Config.MaxBytes != got || info.Config.Discard != jetstream.DiscardNew {
		t.Fatalf("stream config %+v", info.Config)
	}

	if err := js.DeleteStream(ctx, "SMALL"); err != nil { // its bound holds the whole store
		t.Fatal(err)
	}
	cfg = jetstream.StreamConfig{Name: "FITS", Subjects: []string{"fits.>"}, Storage: jetstream.FileStorage}
	StreamLimits{MaxBytes: 8 << 20}.Apply(&cfg)
	if got, err := CreateLimitedStream(ctx, js, cfg); err != nil || got != 8<<20 {
		t.Fatalf("a bound that fits: %d %v", got, err)
	}
}
