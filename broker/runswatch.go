package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jellydator/ttlcache/v3"
	"github.com/nats-io/nats.go/jetstream"
)

// How KVRuns keeps its cache fresh without a round trip per effect: a
// watch on the runs bucket delivers every change (a run opened, a run
// closed) to every broker as it happens, and the cache takes the new
// record at once. So a close made through another broker is seen here
// within the time the change takes to arrive, not after a TTL, and an
// effect's run lookup and lineage checks (its parents) cost no round trip
// once a run is cached. Entries are kept for watchedTTL while the watch
// runs; when it ends (the connection closed, the bucket removed) the cache
// is emptied and entries live only runCacheTTL, as without it.
//
// A lookup that read the bucket concurrently with a change cannot
// overwrite the change: every entry carries the record's KV revision and
// a lower one never replaces a higher one.
const watchedTTL = 10 * time.Minute

// cachedRun is a run record with the revision it was read at.
type cachedRun struct {
	run *Run
	rev uint64
}

// runCache is KVRuns's cache. Safe for concurrent use.
type runCache struct {
	mu       sync.Mutex // orders check-and-set by revision
	c        *ttlcache.Cache[string, cachedRun]
	watching atomic.Bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func newRunCache() *runCache {
	return &runCache{c: ttlcache.New(ttlcache.WithCapacity[string, cachedRun](100_000))}
}

func (c *runCache) get(id string) *Run {
	if it := c.c.Get(id); it != nil {
		return it.Value().run
	}
	return nil
}

// set keeps r at rev unless a newer revision is cached.
func (c *runCache) set(r *Run, rev uint64) {
	ttl := runCacheTTL
	if c.watching.Load() {
		ttl = watchedTTL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if it := c.c.Get(r.ID); it != nil && it.Value().rev > rev {
		return
	}
	c.c.Set(r.ID, cachedRun{run: r, rev: rev}, ttl)
}

func (c *runCache) drop(id string) { c.c.Delete(id) }

// watch starts following kv's changes; stop ends it. The goroutine also
// ends by itself when the watch does.
func (c *runCache) watch(kv jetstream.KeyValue, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		log.Warn("runs: no watch on the bucket; cached runs are trusted for a few seconds only", "err", err)
		return
	}
	c.cancel = cancel
	c.watching.Store(true)
	c.wg.Go(func() {
		defer func() {
			_ = w.Stop()
			c.watching.Store(false)
			c.c.DeleteAll() // from now on only short-lived entries
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					if ctx.Err() == nil {
						log.Warn("runs: the watch on the bucket ended; cached runs are trusted for a few seconds only")
					}
					return
				}
				if e == nil {
					continue
				}
				var r Run
				if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &r) != nil || r.ID != e.Key() {
					c.drop(e.Key())
					continue
				}
				c.set(&r, e.Revision())
			}
		}
	})
}

func (c *runCache) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// Stop ends the watch that keeps the cache fresh. Call it when done with
// the store; a store whose connection closes stops by itself.
func (s *KVRuns) Stop() { s.cache.stop() }
