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
	"sync"
	"sync/atomic"
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
	// parallel (the caller's included). Default GOMAXPROCS. 1 is the
	// serial path: every event signed in turn on the caller's goroutine.
	// The bytes written are the same whatever the value: every line's
	// place and length are fixed before any is signed, and nothing is
	// acknowledged before the batch's log record is fsynced either way.
	SignWorkers int
	// SyncInterval is how often the run files and the head log written
	// since the last time are fsynced in the background, after which the
	// log segments holding their lines are removed (see wal.go). Default
	// 1s. It bounds how much a restart after a crash re-applies, not what
	// is durable: every Append is durable in the log when it returns.
	SyncInterval time.Duration
	// FS is the filesystem written through; nil is OSFS.
	FS FS
}

// Writer appends events to a journal directory. It is the single writer
// of its directory: Open takes an exclusive lock on DIR/LOCK, held until
// Close.
//
// Durable before acknowledged: when Append returns, every event it
// reports as written is in the writer's log (DIR/wal), fsynced, with the
// head log entries registering them, and has been written to its run
// file and the head log, which are fsynced in the background (wal.go).
// A caller (the JetStream consumer, a Committer) acknowledges an event
// only after that. A crash loses nothing Append returned: the next Open
// re-applies the log to the files. It leaves at most a partial last line
// in a file, which Open truncates first, and unacknowledged events, which
// JetStream redelivers and Append dedupes by (run, id).
//
// A Writer is safe for concurrent use; Append calls are serialised by
// one mutex. Append should be called with batches, because the fsync is
// paid once per batch whatever the runs it touches. Lock order: syncMu,
// then mu.
type Writer struct {
	dir    string
	opts   WriterOptions
	fs     FS
	log    *slog.Logger
	lock   io.Closer
	runDir string

	mu         sync.Mutex
	head       File
	headSeq    uint64
	headHash   string
	registered map[string]uint64 // run -> run_seq last registered in the head log
	runs       map[string]*list.Element
	lru        *list.List // of *runState, most recent first
	closed     bool
	failed     error
	tree       *TileTree // the head log's Merkle tree, as tiles; nil until a Checkpointer opens it
	slot       sigSlot
	scratch    []byte // encoding space for Append, under mu

	// The log (wal.go), under mu.
	wal       *walSegment
	walSealed []sealedSegment // segments full or sealed, recycled by the next sync
	walNext   uint64          // number of the next segment
	segSize   int64           // size of the next segment written ahead
	walBuf    []byte
	dirty     map[string]bool // runs written since the last sync
	headDirty bool
	newFiles  bool // a run file was created since the last sync

	failedCh   chan struct{} // closed when failed is first set
	lastStaged chan struct{} // done of the batch staged last (closed: none in flight)

	syncMu  sync.Mutex // serialises syncs
	syncReq chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup

	written atomic.Uint64 // events durably written since Open
}

// runState is what the writer knows of one run file.
type runState struct {
	id        string
	f         File
	seq       uint64
	last      string
	ids       map[string]struct{}
	pend      []byte // lines of the current batch
	pendFirst uint64 // seq of the first of them
	isNew     bool   // file created by this batch
	unsettled int    // staged batches with lines for it not yet settled
}

// Open opens (creating if needed) the journal in dir for writing. It
// takes the directory lock (ErrLocked if another Writer holds it),
// truncates a partial last line of the head log, reads the head log to
// learn each run's registered event, and re-applies the writer's log
// (what a writer that did not close had made durable there but maybe not
// in the files), then fsyncs what it changed. Run files are otherwise
// recovered lazily, the first time a batch touches them.
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
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = time.Second
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	w := &Writer{
		dir:        dir,
		opts:       opts,
		fs:         opts.FS,
		log:        opts.Logger.With("journal", dir),
		runDir:     filepath.Join(dir, runsDir),
		registered: make(map[string]uint64),
		runs:       make(map[string]*list.Element),
		lru:        list.New(),
		dirty:      make(map[string]bool),
		syncReq:    make(chan struct{}, 1),
		failedCh:   make(chan struct{}),
		lastStaged: closedChan(),
		stop:       make(chan struct{}),
	}
	if err := w.fs.MkdirAll(w.runDir, dirMode); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	if opts.Signer != nil {
		w.slot = newSigSlot(opts.Signer)
	}
	var err error
	if w.lock, err = w.fs.Lock(filepath.Join(dir, lockFile)); err != nil {
		return nil, err
	}
	if err := w.openHead(); err != nil {
		w.lock.Close()
		return nil, err
	}
	if err := w.recoverLog(); err != nil {
		w.head.Close()
		w.lock.Close()
		return nil, fmt.Errorf("journal: recover from the writer's log: %w", err)
	}
	w.wg.Go(w.syncLoop)
	return w, nil
}

// scanLines calls fn for each complete line of f (without '\n') and
// returns the offset just past the last complete line. Lines longer than
// MaxLineBytes are passed truncated with long set.
//
// r, when not nil, is reset to read f, so one buffer serves many files.
func scanLines(f io.Reader, r *bufio.Reader, fn func(line []byte, long bool) error) (int64, error) {
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
func (w *Writer) truncateTail(f File, size int64, what string) error {
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
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, fileMode)
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
		w.noteHead(p)
		return nil
	})
	if err == nil && lastErr != nil {
		err = fmt.Errorf("%w: last entry: %v", ErrCorruptHead, lastErr)
	}
	if err == nil {
		err = w.truncateTail(f, size, headFile)
	}
	if err == nil {
		err = syncDir(w.fs, w.dir)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: head log: %w", err)
	}
	w.head = f
	return nil
}

// noteHead takes in a head entry read or re-applied.
func (w *Writer) noteHead(p parsedHead) {
	w.headSeq = p.h.Seq
	w.headHash = hex.EncodeToString(p.hash[:])
	if p.h.RunSeq > w.registered[p.h.Run] {
		w.registered[p.h.Run] = p.h.RunSeq
	}
}

// run returns the state of run id, loading and recovering its file on
// first touch.
func (w *Writer) run(id string) (*runState, error) {
	if el, ok := w.runs[id]; ok {
		w.lru.MoveToFront(el)
		return el.Value.(*runState), nil
	}
	path := filepath.Join(w.runDir, id+runExt)
	_, statErr := w.fs.Lstat(path)
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return nil, fmt.Errorf("journal: run %s: %w", id, err)
	}
	st := &runState{id: id, f: f, ids: make(map[string]struct{}), isNew: errors.Is(statErr, os.ErrNotExist)}
	if st.isNew {
		w.newFiles = true
	}
	var o obj
	size, err := scanLines(f, nil, func(line []byte, long bool) error {
		if long {
			return fmt.Errorf("%w: run %s: line %d too long", ErrCorruptRun, id, st.seq+1)
		}
		return st.note(line, &o)
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

// note takes in the next complete line of the run's file: its id, seq and
// hash. Its seq must be the one after the last.
func (st *runState) note(line []byte, o *obj) error {
	if err := scanObject(line, o); err != nil {
		return fmt.Errorf("%w: run %s: line after %d: %v", ErrCorruptRun, st.id, st.seq, err)
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
		return fmt.Errorf("%w: run %s: line after %d: %v", ErrCorruptRun, st.id, st.seq, err)
	}
	if seq != st.seq+1 {
		return fmt.Errorf("%w: run %s: line %d has seq %d", ErrCorruptRun, st.id, st.seq+1, seq)
	}
	st.seq = seq
	st.last = hex.EncodeToString(h[:])
	st.ids[eid] = struct{}{}
	return nil
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
// ignored. The head log gets one entry per run whose latest event is not
// yet registered. Every line of the batch, run files' and head log's,
// goes into one record of the writer's log, which is fsynced; then the
// lines are written to their files (fsynced later, see wal.go).
//
// A nil error, or an EventErrors, means every event written and every
// duplicate is durable and may be acknowledged. Any other error means
// nothing of the batch may be acknowledged; the Writer then fails all
// further calls (ErrFailed) and must be closed and reopened. (When the
// log record was fsynced but writing the files failed, the batch is
// durable and Append succeeds; the next call fails and the reopened
// Writer writes the files from the log.)
func (w *Writer) Append(batch []Event) ([]Event, error) {
	sb, err := w.stage(batch)
	if err != nil {
		return nil, err
	}
	w.settle(sb, sb.sync())
	return sb.result()
}

// staged is a batch whose lines are in the log but not yet known durable
// (stage), waiting for its fsync and for the batch before it (settle). The
// Committer keeps two or three in flight, so that one batch's fsync runs
// while the next is encoded and written and the one before is applied.
type staged struct {
	written []Event
	evErrs  EventErrors
	seg     *walSegment // holding its record; nil when nothing was logged (duplicates only)
	inPlace bool        // its record is within space written ahead
	runs    []stagedRun // lines to append to run files once durable
	head    []byte      // head log lines, likewise
	prev    chan struct{}
	done    chan struct{} // closed once settled
	err     error         // set before done closes
}

// stagedRun is one run's lines of a staged batch.
type stagedRun struct {
	st    *runState
	lines []byte
}

// sync makes sb's record durable; it needs no lock.
func (sb *staged) sync() error {
	if sb.seg == nil {
		return nil
	}
	return syncRecord(sb.seg, sb.inPlace)
}

// result is what Append returns for a settled batch.
func (sb *staged) result() ([]Event, error) {
	<-sb.done
	if sb.err != nil {
		return nil, sb.err
	}
	if sb.evErrs != nil {
		return sb.written, sb.evErrs
	}
	return sb.written, nil
}

// stage numbers, chains, signs and encodes batch, adds its head entries,
// and writes it as one record of the log, not yet fsynced; the state it
// leaves (seqs, hashes, registrations) is the next batch's starting point.
// Nothing of it is in any file until settle. Errors before the record is
// written fail the Writer (ErrFailed).
func (w *Writer) stage(batch []Event) (*staged, error) {
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
		if start == 0 {
			st.pendFirst = e.Seq
		}
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
	sb, err := w.logBatch(touched, sigs)
	if err != nil {
		w.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrFailed, err)
	}
	sb.written, sb.evErrs = written, evErrs
	return sb, nil
}

// sigJob is one signature to fill: at st.pend[off:], of hash.
type sigJob struct {
	st   *runState
	off  int
	hash string
}

// logBatch signs the pending lines of touched runs (jobs), adds the head
// entries registering them, and writes all of it as one record of the
// log; the lines move from the runs' pending buffers into the staged
// batch. Called under w.mu.
func (w *Writer) logBatch(touched []*runState, jobs []sigJob) (*staged, error) {
	sb := &staged{prev: w.lastStaged, done: make(chan struct{})}
	w.sign(jobs)
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
			return nil, fmt.Errorf("head entry: %w", err)
		}
		lines = append(append(lines, line...), '\n')
		prev = h
	}
	entries := make([]walEntry, 0, len(touched)+1)
	for _, st := range touched {
		if len(st.pend) > 0 {
			entries = append(entries, walEntry{kind: walRun, run: st.id, first: st.pendFirst, lines: st.pend})
		}
	}
	if len(lines) > 0 {
		entries = append(entries, walEntry{kind: walHead, first: w.headSeq + 1, lines: lines})
	}
	if len(entries) > 0 {
		seg, inPlace, err := w.writeRecord(entries)
		if err != nil {
			return nil, err
		}
		sb.seg, sb.inPlace = seg, inPlace
	}
	for _, st := range touched {
		if len(st.pend) > 0 {
			sb.runs = append(sb.runs, stagedRun{st: st, lines: st.pend})
			st.pend = nil
			st.unsettled++
		}
		if st.seq > w.registered[st.id] {
			w.registered[st.id] = st.seq
		}
	}
	sb.head = lines
	w.headSeq, w.headHash = seq, prev
	w.lastStaged = sb.done
	return sb, nil
}

// settle finishes a staged batch, in the order batches were staged: once
// the batch before it is settled and its own record's fsync returned
// (syncErr), its lines are appended to their files. A failed fsync, or a
// batch before it that failed, fails it and the Writer. A batch whose
// record is durable but whose files could not be written succeeds and
// fails the Writer, which must be reopened (the log has the lines).
func (w *Writer) settle(sb *staged, syncErr error) {
	<-sb.prev
	w.mu.Lock()
	defer w.mu.Unlock()
	defer close(sb.done)
	if seg := sb.seg; seg != nil {
		if seg.pending--; seg.sealed && seg.pending == 0 {
			_ = seg.f.Close()
		}
	}
	for _, r := range sb.runs {
		r.st.unsettled--
	}
	switch {
	case syncErr != nil:
		w.fail(syncErr)
		sb.err = fmt.Errorf("%w: %w", ErrFailed, syncErr)
		return
	case w.failed != nil:
		sb.err = fmt.Errorf("%w: %w", ErrFailed, w.failed)
		return
	}
	if err := w.apply(sb); err != nil {
		w.fail(err)
		w.log.Error("journal: the batch is durable in the writer's log but its files could not be written; the writer must be reopened", "err", err)
	}
	w.written.Add(uint64(len(sb.written)))
	w.evict()
}

// apply appends a settled batch's lines to the run files and the head
// log (fsynced later by Sync) and extends the tree. Called under w.mu.
func (w *Writer) apply(sb *staged) error {
	for _, r := range sb.runs {
		if _, err := r.st.f.Write(r.lines); err != nil {
			return fmt.Errorf("run %s: %w", r.st.id, err)
		}
		w.markDirty(r.st)
	}
	if len(sb.head) == 0 {
		return nil
	}
	if _, err := w.head.Write(sb.head); err != nil {
		return fmt.Errorf("head log: %w", err)
	}
	w.headDirty = true
	if w.tree != nil {
		w.tree.appendLines(sb.head)
	}
	return nil
}

func (w *Writer) markDirty(st *runState) {
	w.dirty[st.id] = true
	if st.isNew {
		st.isNew = false
		w.newFiles = true
	}
}

// sign fills every reserved signature of the batch with up to SignWorkers
// goroutines (the caller's among them). Signing needs only each event's
// hash, computed as the batch was chained, and each job writes its own
// disjoint bytes of its run's pending lines, so the order of signing
// changes no byte written.
func (w *Writer) sign(jobs []sigJob) {
	k := w.opts.Signer
	if len(jobs) == 0 {
		return
	}
	if w.opts.SignWorkers <= 1 || len(jobs) == 1 {
		for _, j := range jobs {
			fillSig(j.st.pend[j.off:], j.hash, k)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) {
				return
			}
			fillSig(jobs[i].st.pend[jobs[i].off:], jobs[i].hash, k)
		}
	}
	var signers sync.WaitGroup
	for range min(w.opts.SignWorkers, len(jobs)) - 1 {
		signers.Go(work)
	}
	work()
	signers.Wait()
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// fail marks the Writer failed (the first error stays). Called under mu.
func (w *Writer) fail(err error) {
	if w.failed == nil {
		w.failed = err
		close(w.failedCh)
	}
}

// Failed is closed once the Writer has failed: every later Append returns
// ErrFailed, and the Writer must be closed and the journal opened again.
func (w *Writer) Failed() <-chan struct{} { return w.failedCh }

// askSync asks the background loop to sync soon.
func (w *Writer) askSync() {
	select {
	case w.syncReq <- struct{}{}:
	default:
	}
}

// syncLoop syncs every SyncInterval, and when a segment fills, until Close.
func (w *Writer) syncLoop() {
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.syncReq:
		}
		if err := w.Sync(); err != nil {
			w.mu.Lock()
			if !w.closed {
				w.fail(err)
			}
			w.mu.Unlock()
			w.log.Error("journal: fsync of the journal files failed; the writer must be reopened (its log keeps every acknowledged line)", "err", err)
		}
	}
}

// dirtySet is what a sync makes durable.
type dirtySet struct {
	runs     []string // run ids
	head     bool
	newFiles bool
	segments []sealedSegment // log segments it then recycles
}

// takeDirty hands over what was written since the last sync and seals the
// current segment. Called under w.mu (or during Open).
//
// A segment with records not yet settled stays for a later sync: their
// lines are not in their files yet, so the files' fsync cannot stand for
// them.
func (w *Writer) takeDirty() dirtySet {
	if w.wal != nil && w.wal.size > 0 {
		w.sealCurrent()
	}
	d := dirtySet{head: w.headDirty, newFiles: w.newFiles}
	var keep []sealedSegment
	for _, sg := range w.walSealed {
		if sg.seg != nil && sg.seg.pending > 0 {
			keep = append(keep, sg)
		} else {
			d.segments = append(d.segments, sg)
		}
	}
	for id := range w.dirty {
		d.runs = append(d.runs, id)
	}
	w.dirty, w.headDirty, w.newFiles, w.walSealed = make(map[string]bool), false, false, keep
	return d
}

// Sync makes every file written so far durable and removes the log
// segments that held their lines. The background loop calls it; Close
// does too. Appends go on meanwhile, into a new segment.
func (w *Writer) Sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	d := w.takeDirty()
	w.mu.Unlock()
	if err := w.syncFiles(d); err != nil {
		w.mu.Lock()
		// Keep the segments: the next sync, or the next Open, needs them.
		w.walSealed = append(d.segments, w.walSealed...)
		for _, id := range d.runs {
			w.dirty[id] = true
		}
		w.headDirty = w.headDirty || d.head
		w.newFiles = w.newFiles || d.newFiles
		w.mu.Unlock()
		return err
	}
	return nil
}

// syncFiles fsyncs d's run files (SyncParallelism at once), the runs
// folder when files were created, then the head log, and then removes
// d's log segments.
func (w *Writer) syncFiles(d dirtySet) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, w.opts.SyncParallelism)
	)
	for _, id := range d.runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := syncPath(w.fs, filepath.Join(w.runDir, id+runExt)); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("run %s: %w", id, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if d.newFiles {
		if err := syncDir(w.fs, w.runDir); err != nil {
			return fmt.Errorf("runs directory: %w", err)
		}
	}
	if d.head {
		if err := syncPath(w.fs, filepath.Join(w.dir, headFile)); err != nil {
			return fmt.Errorf("head log: %w", err)
		}
	}
	for _, s := range d.segments {
		if err := w.recycle(s); err != nil {
			return fmt.Errorf("log: %w", err)
		}
	}
	return nil
}

// evict closes the least recently used run states beyond MaxOpenRuns.
func (w *Writer) evict() {
	for el := w.lru.Back(); el != nil && w.lru.Len() > w.opts.MaxOpenRuns; {
		st := el.Value.(*runState)
		prev := el.Prev()
		if st.unsettled == 0 { // a staged batch still has lines for it
			w.lru.Remove(el)
			delete(w.runs, st.id)
			st.f.Close()
		}
		el = prev
	}
}

// closeRuns closes every run state; they are read again when touched.
func (w *Writer) closeRuns() {
	for el := w.lru.Front(); el != nil; el = el.Next() {
		_ = el.Value.(*runState).f.Close()
	}
	w.runs, w.lru = make(map[string]*list.Element), list.New()
}

// Close stops the background sync, makes everything written durable
// (which empties the writer's log; its spare segments are removed too),
// closes the files and drops the lock.
// When that last sync fails, the log keeps what it holds and the next Open
// re-applies it. It is safe to call more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	last := w.lastStaged
	w.mu.Unlock()
	<-last // a batch staged is settled before anything closes
	var errs []error
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	if failed == nil {
		errs = append(errs, w.Sync())
	}
	// Spare segments go whatever happened: they only save a write ahead,
	// and a writer that failed on a full disk must not hold their space
	// while it is reopened.
	errs = append(errs, w.dropSpares())
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for el := w.lru.Front(); el != nil; el = el.Next() {
		errs = append(errs, el.Value.(*runState).f.Close())
	}
	if w.wal != nil {
		errs = append(errs, w.wal.f.Close())
	}
	w.runs, w.lru = nil, nil
	errs = append(errs, w.head.Close(), w.lock.Close())
	return errors.Join(errs...)
}

// Written returns how many events this Writer has durably written since
// Open (duplicates dropped are not counted). Safe to call concurrently.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Dir returns the journal directory.
func (w *Writer) Dir() string { return w.dir }
