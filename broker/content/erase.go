package content

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// EraseUnused erases every blob not used for longer than maxAge, by the
// store's clock. maxAge <= 0 keeps everything.
func (s *Store) EraseUnused(maxAge time.Duration) ([]Erasure, error) {
	if maxAge <= 0 {
		return nil, nil
	}
	defer s.dropIndex()
	cutoff := s.now().Add(-maxAge)
	var old []string
	if err := s.blobs(func(d string, used time.Time) {
		if used.Before(cutoff) {
			old = append(old, d)
		}
	}); err != nil {
		return nil, err
	}
	if len(old) == 0 {
		return nil, nil
	}
	known := s.firstRefs()
	reason := fmt.Sprintf("unused for %s", humanAge(maxAge))
	es := make([]Erasure, 0, len(old))
	for _, d := range old {
		// Used again since the listing (another process kept the same
		// bytes, which refreshes the blob): keep it. This narrows the
		// race with a concurrent Put to the moment of the delete; it does
		// not close it across processes.
		if t, err := s.LastUsed(d); err == nil && !t.Before(cutoff) {
			continue
		}
		r := known[d]
		es = append(es, Erasure{Digest: d, Kind: r.Kind, Run: r.Run, For: r.For, Reason: reason})
	}
	if len(es) == 0 {
		return nil, nil
	}
	return s.Erase(es)
}

func humanAge(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// firstRefs is the first index line of each digest.
func (s *Store) firstRefs() map[string]Ref {
	refs, _ := s.Refs()
	out := make(map[string]Ref, len(refs))
	for _, r := range refs {
		if _, ok := out[r.Digest]; !ok {
			out[r.Digest] = r
		}
	}
	return out
}

// PersonContent lists the blobs kept for one person (never policies or
// grounding rules): request and record blobs the index names for them
// and, when journalDir is not "", the request digests and cited record
// digests of their decisions in the journal, so content whose index line
// was lost is found too. A blob the index also names for
// someone else, or as a policy or grounding rules file, is left out. Only
// blobs still kept are listed.
func (s *Store) PersonContent(p policy.Principal, journalDir string) ([]Erasure, error) {
	refs, err := s.Refs()
	if err != nil {
		return nil, err
	}
	mine := map[string]Erasure{}
	others := map[string]bool{}
	for _, r := range refs {
		if r.Kind == KindPolicy || r.Kind == KindGrounding {
			others[r.Digest] = true // belongs to nobody: never a person's to erase
			continue
		}
		if r.For == p {
			if _, ok := mine[r.Digest]; !ok {
				mine[r.Digest] = Erasure{Digest: r.Digest, Kind: r.Kind, Run: r.Run, For: r.For}
			}
		} else {
			others[r.Digest] = true
		}
	}
	if journalDir != "" {
		if err := journalRequests(journalDir, p, func(run, d string, k Kind) {
			if _, ok := mine[d]; !ok {
				mine[d] = Erasure{Digest: d, Kind: k, Run: run, For: p}
			}
		}); err != nil {
			return nil, err
		}
	}
	var out []Erasure
	for d, e := range mine {
		if others[d] {
			continue
		}
		if _, err := s.LastUsed(d); err == nil { // still kept (folder or object store)
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Erasure) int { return strings.Compare(a.Run+a.Digest, b.Run+b.Digest) })
	return out, nil
}

// ErasePerson erases what PersonContent lists, recording each erasure
// with the reason "person TENANT/PERSON".
func (s *Store) ErasePerson(p policy.Principal, journalDir string) ([]Erasure, error) {
	defer s.dropIndex()
	es, err := s.PersonContent(p, journalDir)
	if err != nil {
		return nil, err
	}
	for i := range es {
		es[i].Reason = "person " + p.Tenant + "/" + p.Person
	}
	return s.Erase(es)
}

// journalRequests calls fn with the run and request digest of every
// policy.decision made for p in the journal at dir, and with the digest of
// each record the decision cites. Unreadable lines are skipped: verify
// reports them.
func journalRequests(dir string, p policy.Principal, fn func(run, digest string, k Kind)) error {
	entries, err := os.ReadDir(filepath.Join(dir, "runs"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("content: journal: %w", err)
	}
	for _, e := range entries {
		run, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !journal.ValidRunID(run) {
			continue
		}
		if err := scanRun(filepath.Join(dir, "runs", e.Name()), func(ev journal.Event) {
			if ev.Type != journal.TypeDecision {
				return
			}
			var d journal.Decision
			if json.Unmarshal(ev.Data, &d) != nil || d.ActingFor != p {
				return
			}
			if ValidDigest(d.RequestDigest) {
				fn(run, d.RequestDigest, KindRequest)
			}
			for _, c := range d.Citations {
				if ValidDigest(c.Digest) {
					fn(run, c.Digest, KindRecord)
				}
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

func scanRun(path string, fn func(journal.Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("content: journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), journal.MaxLineBytes+1)
	for sc.Scan() {
		if ev, err := journal.ParseLine(sc.Bytes()); err == nil {
			fn(ev)
		}
	}
	if err := sc.Err(); err != nil {
		// A line the writer could not have written (over MaxLineBytes):
		// the rest of the run is unread, so say so rather than erase
		// only part of a person's content.
		return fmt.Errorf("content: journal %s: %w", filepath.Base(path), err)
	}
	return nil
}

// EraserConfig configures an Eraser.
type EraserConfig struct {
	// MaxAge is how long content may go unused; <= 0 erases nothing and
	// StartEraser starts no loop.
	MaxAge time.Duration
	// Every is how often to look; default an hour.
	Every  time.Duration
	Logger *slog.Logger
}

// Eraser erases unused content in the background. Its goroutine is owned
// by whoever started it and stops in Close.
type Eraser struct {
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// StartEraser runs s.EraseUnused(cfg.MaxAge) now and then every cfg.Every
// until Close.
func StartEraser(s *Store, cfg EraserConfig) *Eraser {
	e := &Eraser{stop: make(chan struct{})}
	if cfg.MaxAge <= 0 {
		return e
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e.wg.Go(func() {
		t := time.NewTicker(cfg.Every)
		defer t.Stop()
		for {
			es, err := s.EraseUnused(cfg.MaxAge)
			if err != nil {
				log.Error("erasing unused journal content failed", "err", err)
			} else if len(es) > 0 {
				log.Info("erased unused journal content", "blobs", len(es), "unused_for", humanAge(cfg.MaxAge))
			}
			select {
			case <-e.stop:
				return
			case <-t.C:
			}
		}
	})
	return e
}

// Close stops the loop and waits for it.
func (e *Eraser) Close() {
	e.once.Do(func() { close(e.stop) })
	e.wg.Wait()
}
