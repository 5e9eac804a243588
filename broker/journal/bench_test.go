package journal

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			w, err := Open(b.TempDir(), WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			batch := make([]Event, size)
			n := 0
			b.ResetTimer()
			for b.Loop() {
				for i := range batch {
					n++
					batch[i] = ev(b, fmt.Sprintf("r_%026d", n%16), fmt.Sprint(n), TypeDecision, "x", n, decision(OutcomeAllowed))
				}
				if _, err := w.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

const (
	benchRuns      = 10_000
	benchPerRun    = 100
	benchHeadEvery = 10 // one head entry per this many events of a run
)

var (
	bigOnce sync.Once
	bigDir  string
	bigErr  error
	bigLine []byte // a typical event line, for the SHA-256 floor
)

// bigJournal builds, once per process, a journal of 10,000 runs of 100
// events each, encoding lines directly instead of paying fsyncs.
func bigJournal(b *testing.B) string {
	bigOnce.Do(func() {
		bigDir, bigErr = os.MkdirTemp("", "journal-bench")
		if bigErr != nil {
			return
		}
		bigErr = buildBig(b, bigDir)
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigDir
}

func buildBig(b *testing.B, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, runsDir), 0o750); err != nil {
		return err
	}
	hf, err := os.Create(filepath.Join(dir, headFile))
	if err != nil {
		return err
	}
	defer hf.Close()
	hw := bufio.NewWriterSize(hf, 1<<20)
	var headSeq uint64
	var headPrev string
	data := mustJSON(b, decision(OutcomeAllowed))
	for r := range benchRuns {
		run := fmt.Sprintf("r_%026d", r)
		f, err := os.Create(runPath(dir, run))
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 256<<10)
		prev := ""
		for s := 1; s <= benchPerRun; s++ {
			e := Event{V: Version, ID: fmt.Sprintf("e%d", s), Run: run, Seq: uint64(s), Type: TypeDecision, Effect: fmt.Sprintf("x_%d", s),
				Time: epoch.Add(time.Duration(s) * time.Millisecond), Data: data, Prev: prev}
			line, h, err := encodeEvent(e)
			if err != nil {
				return err
			}
			if bigLine == nil {
				bigLine = line
			}
			w.Write(line)
			w.WriteByte('\n')
			prev = h
			if s%benchHeadEvery == 0 {
				headSeq++
				hl, hh, err := encodeHead(HeadEntry{Seq: headSeq, Run: run, RunSeq: uint64(s), Event: h, Time: epoch, Prev: headPrev})
				if err != nil {
					return err
				}
				hw.Write(hl)
				hw.WriteByte('\n')
				headPrev = hh
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return hw.Flush()
}

func BenchmarkVerify(b *testing.B) {
	dir := bigJournal(b)
	b.ResetTimer()
	for b.Loop() {
		rep, err := Verify(dir, VerifyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if !rep.OK || rep.Events != benchRuns*benchPerRun {
			b.Fatalf("bench journal: ok=%v events=%d findings=%v", rep.OK, rep.Events, rep.Findings[:min(3, len(rep.Findings))])
		}
	}
	b.ReportMetric(float64(b.N*benchRuns*benchPerRun)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSHA256Floor hashes the bytes of the 1,000,000 event lines once
// each, on one core: the cost no verifier can avoid.
func BenchmarkSHA256Floor(b *testing.B) {
	bigJournal(b)
	line := bigLine
	b.SetBytes(int64(len(line)) * benchRuns * benchPerRun)
	b.ResetTimer()
	for b.Loop() {
		for range benchRuns * benchPerRun {
			sha256.Sum256(line)
		}
	}
	b.ReportMetric(float64(b.N*benchRuns*benchPerRun)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkParseEvent is one line's full check on one core.
func BenchmarkParseEvent(b *testing.B) {
	bigJournal(b)
	var o obj
	var buf []byte
	var err error
	for b.Loop() {
		if _, buf, err = parseEvent(bigLine, &o, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigDir != "" {
		os.RemoveAll(bigDir)
	}
	os.Exit(code)
}
