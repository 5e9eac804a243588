package journal

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// BenchmarkAppendSigning is the writer's throughput unsigned, signed one
// event after another (SignWorkers=1, the serial path) and signed by a
// batch's worker pool (SignWorkers=0: GOMAXPROCS), in the same run,
// batches of 256 events over 16 runs (fsyncs included, as BenchmarkAppend).
func BenchmarkAppendSigning(b *testing.B) {
	for _, c := range []struct {
		name    string
		signed  bool
		workers int
	}{
		{"unsigned", false, 0},
		{"signed/workers=1", true, 1},
		{fmt.Sprintf("signed/workers=%d", runtime.GOMAXPROCS(0)), true, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := WriterOptions{SignWorkers: c.workers}
			if c.signed {
				opts.Signer = testKey(b, 1)
			}
			w, err := Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			batch := make([]Event, 256)
			n := 0
			for b.Loop() {
				for i := range batch {
					n++
					batch[i] = ev(b, fmt.Sprintf("r_%026d", n%16), fmt.Sprint(n), TypeDecision, "x", n, decision(OutcomeAllowed))
				}
				if _, err := w.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkSignEvent is the signing cost alone: one statement, one
// Ed25519 signature, the member inserted into the line.
func BenchmarkSignEvent(b *testing.B) {
	k := testKey(b, 1)
	line, h, err := encodeEvent(ev(b, "r_a", "e1", TypeDecision, "x", 1, decision(OutcomeAllowed)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sealSigned(line, h, k); err != nil {
			b.Fatal(err)
		}
	}
}

const (
	sigBenchRuns   = 200
	sigBenchPerRun = 100
)

var (
	sigOnce                   sync.Once
	sigSigned, sigRaw, sigOne string
	sigLine                   []byte
	sigErr                    error
)

// sigJournals builds, once, the same 20,000 events as a signed and as an
// unsigned journal (lines encoded directly, no fsyncs).
func sigJournals(b *testing.B) (signed, unsigned string) {
	sigOnce.Do(func() {
		sigSigned, sigErr = os.MkdirTemp("", "journal-sig-bench")
		if sigErr == nil {
			sigRaw, sigErr = os.MkdirTemp("", "journal-nosig-bench")
		}
		if sigErr == nil {
			sigOne, sigErr = os.MkdirTemp("", "journal-sig1-bench")
		}
		if sigErr == nil {
			sigErr = buildSigBench(b, sigSigned, testKey(b, 1), sigBenchRuns, sigBenchPerRun)
		}
		if sigErr == nil {
			sigErr = buildSigBench(b, sigRaw, nil, sigBenchRuns, sigBenchPerRun)
		}
		if sigErr == nil {
			sigErr = buildSigBench(b, sigOne, testKey(b, 1), 1, sigBenchRuns*sigBenchPerRun)
		}
	})
	if sigErr != nil {
		b.Fatal(sigErr)
	}
	return sigSigned, sigRaw
}

func buildSigBench(b *testing.B, dir string, k *SigningKey, runs, perRun int) error {
	if err := os.MkdirAll(filepath.Join(dir, runsDir), 0o750); err != nil {
		return err
	}
	var head []byte
	var headSeq uint64
	headPrev := ""
	data := mustJSON(b, decision(OutcomeAllowed))
	for r := range runs {
		run := fmt.Sprintf("r_%026d", r)
		var out []byte
		prev := ""
		for s := 1; s <= perRun; s++ {
			line, h, err := encodeEvent(Event{V: Version, ID: fmt.Sprintf("e%d", s), Run: run, Seq: uint64(s), Type: TypeDecision,
				Effect: fmt.Sprintf("x_%d", s), Time: epoch.Add(time.Duration(s) * time.Millisecond), Data: data, Prev: prev})
			if err != nil {
				return err
			}
			if k != nil {
				if line, err = sealSigned(line, h, k); err != nil {
					return err
				}
			}
			if sigLine == nil {
				sigLine = line
			}
			out = append(append(out, line...), '\n')
			prev = h
		}
		headSeq++
		hl, hh, err := encodeHead(HeadEntry{Seq: headSeq, Run: run, RunSeq: uint64(perRun), Event: prev, Time: epoch, Prev: headPrev})
		if err != nil {
			return err
		}
		head = append(append(head, hl...), '\n')
		headPrev = hh
		if err := os.WriteFile(runPath(dir, run), out, 0o640); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, headFile), head, 0o640)
}

// BenchmarkVerifySignatures is verify's throughput on 20,000 events:
// unsigned, signed but unchecked, signed and checked (on every core; on
// one; and the same events as one run of 20,000), against plain SHA-256
// of the same lines on one core (the floor).
func BenchmarkVerifySignatures(b *testing.B) {
	signed, unsigned := sigJournals(b)
	keys, _ := NewTrustedKeys(testKey(b, 1).Public())
	const events = sigBenchRuns * sigBenchPerRun
	for _, c := range []struct {
		name string
		dir  string
		opts VerifyOptions
	}{
		{"unsigned", unsigned, VerifyOptions{}},
		{"signed-unchecked", signed, VerifyOptions{}},
		{"signed-checked", signed, VerifyOptions{Keys: keys, RequireSignatures: true}},
		{"signed-checked-one-run", sigOne, VerifyOptions{Keys: keys, RequireSignatures: true}},
		{"signed-checked-one-core", signed, VerifyOptions{Keys: keys, RequireSignatures: true, Workers: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rep, err := Verify(c.dir, c.opts)
				if err != nil || !rep.OK || rep.Events != events {
					b.Fatalf("%v %+v", err, rep.Findings[:min(3, len(rep.Findings))])
				}
			}
			b.ReportMetric(float64(b.N*events)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("sha256-floor", func(b *testing.B) {
		for b.Loop() {
			for range events {
				sha256.Sum256(sigLine)
			}
		}
		b.ReportMetric(float64(b.N*events)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkCheckpoint1M: a tree of 1,000,000 head entries: building it
// (what a checkpointer and a verifier pay once), its root, a signed
// checkpoint, a consistency proof and an inclusion proof with their checks.
func BenchmarkCheckpoint1M(b *testing.B) {
	const n = 1_000_000
	leaves := make([]tlog.Hash, n)
	for i := range leaves {
		leaves[i] = tlog.RecordHash(fmt.Appendf(nil, `{"seq":%d}`, i+1))
	}
	var tr Tree
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			tr = Tree{}
			for _, h := range leaves {
				tr.AppendHash(h)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
	})
	if tr.Size() != n {
		for _, h := range leaves {
			tr.AppendHash(h)
		}
	}
	k := testKey(b, 1)
	signer := NewLogSigner("bench.example/log", k)
	b.Run("sign-checkpoint", func(b *testing.B) {
		for b.Loop() {
			root, _ := tr.Root(n)
			if _, err := note.Sign(&note.Note{Text: FormatCheckpoint("bench.example/log", n, root)}, signer); err != nil {
				b.Fatal(err)
			}
		}
	})
	root, _ := tr.Root(n)
	old := int64(n - 12_345)
	oldRoot, _ := tr.Root(old)
	b.Run("consistency-proof", func(b *testing.B) {
		for b.Loop() {
			p, err := tr.ConsistencyProof(old, n)
			if err != nil || tlog.CheckTree(p, n, root, old, oldRoot) != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inclusion-proof", func(b *testing.B) {
		for b.Loop() {
			p, err := tr.InclusionProof(654_321, n)
			if err != nil || tlog.CheckRecord(p, n, root, 654_321, leaves[654_321]) != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTiles1M: the same tree of 1,000,000 head entries kept as tiles
// on disk (what the writer keeps): building it, the memory it holds once
// built against the in-memory tree's, and a consistency and an inclusion
// proof read from the tiles (the cache cold, then warm).
func BenchmarkTiles1M(b *testing.B) {
	const n = 1_000_000
	leaves := make([]tlog.Hash, n)
	for i := range leaves {
		leaves[i] = tlog.RecordHash(fmt.Appendf(nil, `{"seq":%d}`, i+1))
	}
	var tt *TileTree
	dir := b.TempDir()
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			_ = os.RemoveAll(dir)
			tt = &TileTree{dir: dir, log: testLogger(), cache: map[tileKey]*list.Element{}, lru: list.New()}
			for _, h := range leaves {
				tt.add(h)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
	})
	held := 0
	for _, e := range tt.edge {
		held += cap(e) * tlog.HashSize
	}
	held += tt.lru.Len() * tileBytes
	var mem Tree
	for _, h := range leaves {
		mem.AppendHash(h)
	}
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(held), "tile-tree-bytes")
		b.ReportMetric(float64(len(mem.hashes)*tlog.HashSize), "memory-tree-bytes")
	})
	root, _ := mem.Root(n)
	old := int64(n - 12_345)
	oldRoot, _ := mem.Root(old)
	for _, warm := range []bool{false, true} {
		b.Run(fmt.Sprintf("consistency-proof/warm=%v", warm), func(b *testing.B) {
			for b.Loop() {
				if !warm {
					clear(tt.cache)
					tt.lru.Init()
				}
				p, err := tt.ConsistencyProof(old, n)
				if err != nil || tlog.CheckTree(p, n, root, old, oldRoot) != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("inclusion-proof/warm=%v", warm), func(b *testing.B) {
			for b.Loop() {
				if !warm {
					clear(tt.cache)
					tt.lru.Init()
				}
				p, err := tt.InclusionProof(654_321, n)
				if err != nil || tlog.CheckRecord(p, n, root, 654_321, leaves[654_321]) != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStrictVerify is one strict signature check the way verify
// does it (crypto/ed25519 after the checks of R and S), next to the same
// equation with the key's point decoded once and filippo.io/edwards25519's
// arithmetic, which sigverify.go explains was left out. The two alternate
// check by check, so the machine's load weighs on both alike.
func BenchmarkStrictVerify(b *testing.B) {
	k := testKey(b, 1)
	msg := Statement("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", k.KeyID())
	sig := k.sign(msg)
	a, _ := new(edwards25519.Point).SetBytes(k.Public())
	negA := new(edwards25519.Point).Negate(a)
	decodedOnce := func() {
		s, _ := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:])
		h := sha512.New()
		h.Write(sig[:32])
		h.Write(k.Public())
		h.Write(msg)
		kh, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
		if r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(kh, negA, s); !bytes.Equal(r.Bytes(), sig[:32]) {
			b.Fatal("does not verify")
		}
	}
	var std, once time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := verifyChecked(k.Public(), msg, sig); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		decodedOnce()
		std, once = std+t1.Sub(t0), once+time.Since(t1)
	}
	b.ReportMetric(float64(std.Nanoseconds())/float64(b.N), "crypto-ed25519-ns")
	b.ReportMetric(float64(once.Nanoseconds())/float64(b.N), "edwards25519-decoded-once-ns")
}
