package journal

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestTilePath(t *testing.T) {
	for _, c := range []struct {
		l    int
		n    int64
		w    int
		want string
	}{
		{0, 0, 256, "tile/0/000"},
		{0, 1234067, 256, "tile/0/x001/x234/067"},
		{2, 5, 7, "tile/2/005.p/7"},
		{1, 1000, 256, "tile/1/x001/000"},
	} {
		if got := tilePath(c.l, c.n, c.w); got != c.want {
			t.Errorf("tilePath(%d, %d, %d) = %s, want %s", c.l, c.n, c.w, got, c.want)
		}
	}
}

// writeHeadLines writes n synthetic head log lines ({"seq":i,...}) to
// dir's head.jsonl; the tree only hashes their bytes.
func writeHeadLines(t *testing.T, dir string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, headFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := from; i <= to; i++ {
		fmt.Fprintf(f, "{\"event\":\"e%d\",\"seq\":%d,\"x\":1}\n", i, i)
	}
}

// The tiled tree gives the roots and proofs of the in-memory one at every
// size, across a level-1 tile boundary, keeping only its right edge and a
// bounded cache in memory; reopened, it reads the tiles back and the head
// log lines after them.
func TestTileTreeMatchesTheMemoryTree(t *testing.T) {
	dir := t.TempDir()
	const n = 256*256 + 300 // a full level-1 tile and then some
	writeHeadLines(t, dir, 1, n/2)
	tt, err := OpenTileTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := &Tree{}
	if err := ReadHeadLines(dir, func(line []byte) error { mem.Append(line); return nil }); err != nil {
		t.Fatal(err)
	}
	writeHeadLines(t, dir, n/2+1, n)
	// Reopened with half of the log in tiles: it resumes after them.
	tt, err = OpenTileTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem = &Tree{}
	if err := ReadHeadLines(dir, func(line []byte) error { mem.Append(line); return nil }); err != nil {
		t.Fatal(err)
	}
	if tt.Size() != n || mem.Size() != n {
		t.Fatalf("sizes %d and %d, want %d", tt.Size(), mem.Size(), n)
	}
	for l, e := range tt.edge {
		if len(e) >= tileWidth {
			t.Fatalf("level %d keeps %d hashes", l, len(e))
		}
	}
	for _, size := range []int64{1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, n} {
		a, err1 := tt.Root(size)
		b, err2 := mem.Root(size)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("root of %d: %v %v (%v %v)", size, a, b, err1, err2)
		}
		for _, leaf := range []int64{0, size / 2, size - 1} {
			p, err := tt.InclusionProof(leaf, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(p, size, a, leaf, mem.hashes[tlog.StoredHashIndex(0, leaf)]); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", leaf, size, err)
			}
		}
		if size > 1 {
			p, err := tt.ConsistencyProof(size/2, size)
			if err != nil {
				t.Fatal(err)
			}
			old, _ := mem.Root(size / 2)
			if err := tlog.CheckTree(p, size, a, size/2, old); err != nil {
				t.Fatalf("consistency %d to %d: %v", size/2, size, err)
			}
		}
	}
	if tt.lru.Len() > tileCacheSize {
		t.Fatalf("%d tiles cached", tt.lru.Len())
	}
	if err := tt.WritePartials(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, tilesDir, tilePath(0, n/256, n%256))); err != nil {
		t.Fatalf("partial level-0 tile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tilesDir, tilePath(1, 0, 256))); err != nil {
		t.Fatalf("full level-1 tile: %v", err)
	}
}

// A damaged tile is caught against the latest checkpoint and the tiles
// are rebuilt from the head log; a state that points into the middle of a
// line is refused the same way.
func TestTileTreeRebuildsDamagedTiles(t *testing.T) {
	dir := t.TempDir()
	writeHeadLines(t, dir, 1, 1000)
	tt, err := OpenTileTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tt.Root(1000)
	p := filepath.Join(dir, tilesDir, tilePath(0, 1, 256))
	b, _ := os.ReadFile(p)
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w := &Writer{dir: dir, headSeq: 1000}
	got, err := openTreeFor(w, &Checkpoint{Size: 1000, Hash: want}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := got.Root(1000); r != want {
		t.Fatal("the damaged tile was not rebuilt")
	}
	if err := os.WriteFile(filepath.Join(dir, tilesDir, tilesState), []byte(`{"leaves":256,"head_offset":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tt, err = OpenTileTree(dir, testLogger())
	if err != nil || tt.Size() != 1000 {
		t.Fatalf("bad state: size %d, %v", tt.Size(), err)
	}
	if r, _ := tt.Root(1000); r != want {
		t.Fatal("bad state was not rebuilt")
	}
}

func testLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
