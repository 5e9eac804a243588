package journal

import (
	"bufio"
	"container/list"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	runsDir  = "runs"
	headFile = "head.jsonl"
	lockFile = "LOCK"
	runExt   = ".jsonl"

	fileMode = 0o640
	dirMode  = 0o750
)

// WriterOptions configure a Writer. The zero value is usable.
type WriterOptions struct {
	// Now gives the time written in head entries. Default time.Now.
	Now func() time.Time
	// Logger receives recovery notices. Default slog.Default().
	Logger *slog.Logger
	// MaxOpenRuns bounds the run states (open file, seen ids) kept between
	// batches; the least recently used are closed beyond it. Default 1024.
	MaxOpenRuns int
	// SyncParallelism bounds concurrent fsyncs of run files within one
	// Append. Default 8.
	SyncParallelism int
	// Signer, when set, signs every event it writes (see sigline.go).
	// Nil writes unsigned events.
	Signer *SigningKey
	// SignWorkers bounds the goroutines signing one batch's events in
	// parallel (the caller's included); each run file is written and
	// fsynced as soon as its events are signed, overlapping the signing of
	// the others. Default GOMAXPROCS. 1 is the serial path: every event
	// signed in turn on the caller's goroutine, then the files written and
	// fsynced. The bytes written are the same whatever the value: every
	// line's place and length are fixed before any is signed, and nothing
	// is acknowledged before the head log's fsync either way.
	SignWorkers int
}

// Writer appends events to a journal directory. It is the single writer
// of its directory: Open takes an exclusive flock on DIR/LOCK, held until
// Close.
//
// Durable before acknowledged: when Append returns, every event it
// reports as written is in its run file, every touched run file has been
// fsynced, and the head log entries registering them have been written and
// fsynced, in that order. A caller (the JetStream consumer) acknowledges
// an event only after that. A crash before then leaves at most a partial
// last line, which the next Writer truncates, and unacknowledged events,
// which JetStream redelivers and Append dedupes by (run, id).
//
// A Writer is safe for concurrent use; Append calls are serialised by one
// mutex, the only lock. Append should be called with batches, because the
// fsyncs are paid once per batch.
type Writer struct {
	dir    string
	opts   WriterOptions
	log    *slog.Logger
	lockF  *os.File
	runDir *os.File // held open to fsync new directory entries

	mu         sync.Mutex
	head       *os.File
	headSeq    uint64
	headHash   string
	registered map[string]uint64 // run -> run_seq last registered in the head log
	runs       map[string]*list.Element
	lru        *list.List // of *runState, most recent first
	closed     bool
	failed     error
	tree       *Tree // the head log's Merkle tree; nil until a Checkpointer builds it
	slot       sigSlot
	scratch    []byte // encoding space for Append, under mu

	written atomic.Uint64 // events durably written since Open
}

// runState is what the writer knows of one run file.
type runState struct {
	id    string
	f     *os.File
	seq   uint64
	last  string
	ids   map[string]struct{}
	pend  []byte // lines of the current batch
	isNew bool   // file created by this batch
}

// Open opens (creating if needed) the journal in dir for writing. It
// takes the directory lock (ErrLocked if another Writer holds it),
// truncates a partial last line of the head log, and reads the head log to
// learn each run's registered event. Run files are recovered lazily, the
// first time a batch touches them.
func Open(dir string, opts WriterOptions) (*Writer, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxOpenRuns <= 0 {
		opts.MaxOpenRuns = 1024
	}
	if opts.SyncParallelism <= 0 {
		opts.SyncParallelism = 8
	}
	if opts.SignWorkers <= 0 {
		opts.SignWorkers = runtime.GOMAXPROCS(0)
	}
	if err := os.MkdirAll(filepath.Join(dir, runsDir), dirMode); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	w := &Writer{
		dir:        dir,
		opts:       opts,
		log:        opts.Logger.With("journal", dir),
		registered: make(map[string]uint64),
		runs:       make(map[string]*list.Element),
		lru:        list.New(),
	}
	if opts.Signer != nil {
		w.slot = newSigSlot(opts.Signer)
	}
	var err error
	if w.lockF, err = lockDir(filepath.Join(dir, lockFile)); err != nil {
		return nil, err
	}
	if w.runDir, err = os.Open(filepath.Join(dir, runsDir)); err != nil {
		w.lockF.Close()
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if err := w.openHead(); err != nil {
		w.runDir.Close()
		w.lockF.Close()
		return nil, err
	}
	return w, nil
}

func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("journal: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	return f, nil
}

// scanLines calls fn for each complete line of f (without '\n') and
// returns the offset just past the last complete line. Lines longer than
// MaxLineBytes are passed truncated with long set.
//
// r, when not nil, is reset to read f, so one buffer serves many files.
func scanLines(f *os.File, r *bufio.Reader, fn func(line []byte, long bool) error) (int64, error) {
	if r == nil {
		r = bufio.NewReaderSize(f, 64<<10)
	} else {
		r.Reset(f)
	}
	var off, cur int64 // just past the last complete line; bytes of the current one
	var acc []byte
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			cur += int64(len(chunk))
			if !long && len(acc)+len(chunk) <= MaxLineBytes {
				acc = append(acc, chunk...)
			} else {
				long = true
			}
			continue
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return 0, err
		}
		cur += int64(len(chunk))
		off, cur = off+cur, 0
		line := chunk[:len(chunk)-1]
		switch {
		case long:
			line = acc // what fits; the line is reported long
		case len(acc) > 0:
			acc = append(acc, line...)
			line = acc
			long = len(line) > MaxLineBytes
		}
		if err := fn(line, long); err != nil {
			return 0, err
		}
		acc, long = acc[:0], false
	}
}

// truncateTail cuts f to size when it is longer: the partial last line of
// an interrupted write, never acknowledged.
func (w *Writer) truncateTail(f *os.File, size int64, what string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == size {
		return nil
	}
	w.log.Warn("journal: truncating partial last line", "file", what, "from", st.Size(), "to", size)
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

func (w *Writer) openHead() error {
	path := filepath.Join(w.dir, headFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return fmt.Errorf("journal: open head log: %w", err)
	}
	var o obj
	var buf []byte
	var lastErr error
	size, err := scanLines(f, nil, func(line []byte, long bool) error {
		var p parsedHead
		lastErr = nil
		if long {
			lastErr = fmt.Errorf("%w: line too long", ErrMalformed)
			return nil
		}
		p, buf, lastErr = parseHead(line, &o, buf)
		if lastErr != nil {
			return nil
		}
		w.headSeq = p.h.Seq
		w.headHash = hex.EncodeToString(p.hash[:])
		if p.h.RunSeq > w.registered[p.h.Run] {
			w.registered[p.h.Run] = p.h.RunSeq
		}
		return nil
	})
	if err == nil && lastErr != nil {
		err = fmt.Errorf("%w: last entry: %v", ErrCorruptHead, lastErr)
	}
	if err == nil {
		err = w.truncateTail(f, size, headFile)
	}
	if err == nil {
		err = syncDir(w.dir)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: head log: %w", err)
	}
	w.head = f
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// run returns the state of run id, loading and recovering its file on
// first touch.
func (w *Writer) run(id string) (*runState, error) {
	if el, ok := w.runs[id]; ok {
		w.lru.MoveToFront(el)
		return el.Value.(*runState), nil
	}
	path := filepath.Join(w.dir, runsDir, id+runExt)
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("journal: run %s: %w", id, err)
	}
	st := &runState{id: id, f: f, ids: make(map[string]struct{}), isNew: errors.Is(statErr, os.ErrNotExist)}
	var o obj
	size, err := scanLines(f, nil, func(line []byte, long bool) error {
		if long {
			return fmt.Errorf("%w: run %s: line %d too long", ErrCorruptRun, id, st.seq+1)
		}
		if err := scanObject(line, &o); err != nil {
			return fmt.Errorf("%w: run %s: line %d: %v", ErrCorruptRun, id, st.seq+1, err)
		}
		var idv, seqv, hashv []byte
		for i := 0; i < o.n; i++ {
			switch string(o.ms[i].key) {
			case "id":
				idv = o.ms[i].val
			case "seq":
				seqv = o.ms[i].val
			case "hash":
				hashv = o.ms[i].val
			}
		}
		eid, err1 := parseString(idv)
		seq, err2 := parseUint(seqv)
		h, err3 := parseHex(hashv)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("%w: run %s: line %d: %v", ErrCorruptRun, id, st.seq+1, err)
		}
		if seq != st.seq+1 {
			return fmt.Errorf("%w: run %s: line %d has seq %d", ErrCorruptRun, id, st.seq+1, seq)
		}
		st.seq = seq
		st.last = hex.EncodeToString(h[:])
		st.ids[eid] = struct{}{}
		return nil
	})
	if err == nil {
		err = w.truncateTail(f, size, filepath.Join(runsDir, id+runExt))
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, ErrCorruptRun) {
			err = fmt.Errorf("journal: run %s: %w", id, err)
		}
		return nil, err
	}
	w.runs[id] = w.lru.PushFront(st)
	return st, nil
}

func validate(e Event) error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: empty id", ErrInvalidEvent)
	case len(e.ID) > 256:
		return fmt.Errorf("%w: id longer than 256 bytes", ErrInvalidEvent)
	case !ValidRunID(e.Run):
		return fmt.Errorf("%w: %w: %q", ErrInvalidEvent, ErrBadRunID, e.Run)
	case !e.Type.Known():
		return fmt.Errorf("%w: unknown type %q", ErrInvalidEvent, e.Type)
	case e.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrInvalidEvent)
	case e.V != 0 && e.V != Version:
		return fmt.Errorf("%w: version %d", ErrInvalidEvent, e.V)
	}
	return nil
}

// Append writes batch and returns the events written, in batch order,
// with V, Seq, Prev and Hash set and Time in UTC.
//
// For each event: an invalid one is not written (its EventError wraps
// ErrInvalidEvent); one whose (run, id) is already in the journal is
// dropped silently, the first write winning; the rest are numbered in
// batch order within their run. Seq, Prev and Hash given on input are
// ignored. Then every touched run file is appended and fsynced, and the
// head log gets one entry per run whose latest event is not yet
// registered, and is fsynced.
//
// A nil error, or an EventErrors, means every event written and every
// duplicate is durable and may be acknowledged. Any other error means
// nothing of the batch may be acknowledged; the Writer then fails all
// further calls (ErrFailed) and must be closed and reopened.
func (w *Writer) Append(batch []Event) ([]Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.failed != nil {
		return nil, fmt.Errorf("%w: %w", ErrFailed, w.failed)
	}
	var (
		evErrs  EventErrors
		touched []*runState
		inBatch = make(map[*runState]bool)
		written = make([]Event, 0, len(batch))
		sigs    []sigJob
	)
	for i, e := range batch {
		if err := validate(e); err != nil {
			evErrs = append(evErrs, EventError{Index: i, ID: e.ID, Err: err})
			continue
		}
		st, err := w.run(e.Run)
		if err != nil {
			evErrs = append(evErrs, EventError{Index: i, ID: e.ID, Err: err})
			continue
		}
		if !inBatch[st] {
			inBatch[st] = true
			touched = append(touched, st)
		}
		if _, dup := st.ids[e.ID]; dup {
			continue
		}
		e.V = Version
		e.Time = e.Time.UTC()
		e.Seq = st.seq + 1
		e.Prev = st.last
		e.Hash = ""
		start, at := len(st.pend), -1
		data, err := canonicalData(e.Data)
		var h string
		if err == nil {
			h, w.scratch, err = eventHash(w.scratch, &e, data)
		}
		if err == nil {
			// With a signer, the signature's place is reserved now and
			// filled by commit, once the whole batch is chained.
			var sig []byte
			if w.opts.Signer != nil {
				sig = w.slot.val
			}
			st.pend, at, err = appendEvent(st.pend, &e, data, h, sig)
		}
		if n := len(st.pend) - start; err == nil && n > MaxLineBytes {
			err = fmt.Errorf("%w: line of %d bytes", ErrInvalidEvent, n)
		}
		if err != nil {
			st.pend = st.pend[:start]
			evErrs = append(evErrs, EventError{Index: i, ID: e.ID, Err: err})
			continue
		}
		if w.opts.Signer != nil {
			sigs = append(sigs, sigJob{st: st, off: at + w.slot.off, hash: h})
		}
		e.Hash = h
		st.pend = append(st.pend, '\n')
		st.seq, st.last = e.Seq, h
		st.ids[e.ID] = struct{}{}
		written = append(written, e)
	}
	if err := w.commit(touched, sigs); err != nil {
		w.failed = err
		return nil, fmt.Errorf("%w: %w", ErrFailed, err)
	}
	w.written.Add(uint64(len(written)))
	w.evict()
	if evErrs != nil {
		return written, evErrs
	}
	return written, nil
}

// sigJob is one signature to fill: at st.pend[off:], of hash.
type sigJob struct {
	st   *runState
	off  int
	hash string
}

// commit signs the pending lines of touched runs (jobs), makes them
// durable, then registers them in the head log.
func (w *Writer) commit(touched []*runState, jobs []sigJob) error {
	newFile := false
	var toWrite []*runState
	for _, st := range touched {
		if len(st.pend) == 0 {
			continue
		}
		newFile = newFile || st.isNew
		st.isNew = false
		toWrite = append(toWrite, st)
	}
	var err error
	if len(jobs) > 0 && w.opts.SignWorkers > 1 {
		err = w.signAndFlush(toWrite, jobs)
	} else {
		for _, j := range jobs {
			fillSig(j.st.pend[j.off:], j.hash, w.opts.Signer)
		}
		err = w.flushRuns(toWrite)
	}
	if err != nil {
		return err
	}
	if newFile {
		if err := w.runDir.Sync(); err != nil {
			return fmt.Errorf("runs directory: %w", err)
		}
	}
	var lines []byte
	seq, prev := w.headSeq, w.headHash
	now := w.opts.Now().UTC()
	for _, st := range touched {
		if st.seq <= w.registered[st.id] {
			continue
		}
		seq++
		line, h, err := encodeHead(HeadEntry{Seq: seq, Run: st.id, RunSeq: st.seq, Event: st.last, Time: now, Prev: prev})
		if err != nil {
			return fmt.Errorf("head entry: %w", err)
		}
		lines = append(append(lines, line...), '\n')
		prev = h
	}
	if len(lines) == 0 {
		return nil
	}
	if _, err := w.head.Write(lines); err != nil {
		return fmt.Errorf("head log: %w", err)
	}
	if err := w.head.Sync(); err != nil {
		return fmt.Errorf("head log: %w", err)
	}
	w.headSeq, w.headHash = seq, prev
	if w.tree != nil {
		w.tree.appendLines(lines)
	}
	for _, st := range touched {
		if st.seq > w.registered[st.id] {
			w.registered[st.id] = st.seq
		}
	}
	return nil
}

// flush appends a run's pending lines to its file and fsyncs it.
func (st *runState) flush() error {
	if _, err := st.f.Write(st.pend); err != nil {
		return fmt.Errorf("run %s: %w", st.id, err)
	}
	st.pend = st.pend[:0]
	if err := st.f.Sync(); err != nil {
		return fmt.Errorf("run %s: %w", st.id, err)
	}
	return nil
}

// flushRuns flushes the runs, a few at a time; it returns when all are
// done.
func (w *Writer) flushRuns(runs []*runState) error {
	if len(runs) == 1 {
		return runs[0].flush()
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, w.opts.SyncParallelism)
	)
	for _, st := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := st.flush(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// signAndFlush fills every reserved signature of the batch with up to
// SignWorkers goroutines (the caller's among them), and flushes each run
// (write, fsync; at most SyncParallelism at once) as soon as its last
// signature is filled, so that signing the next runs overlaps the fsyncs
// of the first. Signing needs only each event's hash, computed as the
// batch was chained, and each job writes its own disjoint bytes of its
// run's pending lines, which nothing else touches until that run is
// flushed; so neither the order of signing nor that of flushing changes a
// byte written. It returns when every run is flushed (or failed).
func (w *Writer) signAndFlush(runs []*runState, jobs []sigJob) error {
	// Jobs grouped by run, in run order, so the first runs complete first.
	left := make(map[*runState]*atomic.Int32, len(runs))
	order := make(map[*runState]int, len(runs))
	for i, st := range runs {
		left[st], order[st] = new(atomic.Int32), i
	}
	for _, j := range jobs {
		left[j.st].Add(1)
	}
	slices.SortStableFunc(jobs, func(a, b sigJob) int { return order[a.st] - order[b.st] })

	var (
		flushes sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		sem     = make(chan struct{}, w.opts.SyncParallelism)
		next    atomic.Int64
	)
	flush := func(st *runState) {
		flushes.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := st.flush(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	for _, st := range runs {
		if left[st].Load() == 0 { // nothing to sign (cannot happen with a signer; kept total)
			flush(st)
		}
	}
	k := w.opts.Signer
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) {
				return
			}
			j := jobs[i]
			fillSig(j.st.pend[j.off:], j.hash, k)
			if left[j.st].Add(-1) == 0 {
				flush(j.st)
			}
		}
	}
	var signers sync.WaitGroup
	for range min(w.opts.SignWorkers, len(jobs)) - 1 {
		signers.Go(work)
	}
	work()
	signers.Wait()
	flushes.Wait()
	return errors.Join(errs...)
}

// evict closes the least recently used run states beyond MaxOpenRuns.
func (w *Writer) evict() {
	for w.lru.Len() > w.opts.MaxOpenRuns {
		el := w.lru.Back()
		st := el.Value.(*runState)
		w.lru.Remove(el)
		delete(w.runs, st.id)
		st.f.Close()
	}
}

// Close releases the directory. Nothing is buffered between Appends, so
// there is nothing to flush; Close closes the files and drops the lock.
// It is safe to call more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for el := w.lru.Front(); el != nil; el = el.Next() {
		errs = append(errs, el.Value.(*runState).f.Close())
	}
	w.runs, w.lru = nil, nil
	errs = append(errs, w.head.Close(), w.runDir.Close(), w.lockF.Close())
	return errors.Join(errs...)
}

// Written returns how many events this Writer has durably written since
// Open (duplicates dropped are not counted). Safe to call concurrently.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Dir returns the journal directory.
func (w *Writer) Dir() string { return w.dir }
