package journal

import (
	"bufio"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// The writer's Merkle tree over the head log is kept as hash tiles on
// disk, in the C2SP tlog-tiles layout, instead of every hash in memory
// (64 bytes an entry: 6 GB at 100 million):
//
//	tiles/tile/<L>/<N>       a full tile: 256 hashes of 32 bytes, the
//	                         roots of the height-8L subtrees N*256 to
//	                         N*256+255 (level 0: the leaves, SHA-256 of
//	                         0x00 and a head log line)
//	tiles/tile/<L>/<N>.p/<W> a partial tile of W hashes, written with each
//	                         checkpoint so the tiles of its size exist
//	tiles/state              how many leaves the full level-0 tiles cover
//	                         and where the next head log line starts
//
// N is written in groups of three digits, all but the last with an x
// (1234067 is x001/x234/067), as C2SP says. The leaves' data are the head
// log's lines, in head.jsonl: no entry bundles are written. In memory the
// tree keeps only its right edge, the incomplete tile of each level (at
// most 255 hashes a level), and a small cache of full tiles; proofs and
// roots read the tiles they need (tlog.HashFromTile).
//
// Tiles are derived data: written without fsync (a full tile to a
// temporary name, then renamed), checked against the latest signed
// checkpoint when the tree is opened, and rebuilt from the head log when
// they do not match it or cannot be read.
const (
	tilesDir      = "tiles"
	tileH         = 8
	tileWidth     = 1 << tileH
	tileBytes     = tileWidth * tlog.HashSize
	tileCacheSize = 64 // full tiles kept in memory: 512 KiB
	tilesState    = "state"
	// stateEvery: tiles/state is rewritten every this many level-0 tiles
	// (and with the partial tiles of each checkpoint). A state behind the
	// tiles costs only re-reading those head log lines at the next open.
	stateEvery = 64
)

// TileTree is the head log's tree kept as tiles under DIR/tiles. Not safe
// for concurrent use: the Writer guards its own under its lock.
type TileTree struct {
	dir  string // DIR/tiles
	log  *slog.Logger
	n    int64         // leaves
	edge [][]tlog.Hash // edge[L]: the incomplete tile of level L
	off  int64         // bytes of head log lines the leaves are
	// fullAt is where the last full level-0 tile ends: what tiles/state
	// says once saved.
	fullAt   tileState
	cache    map[tileKey]*list.Element
	lru      *list.List // of *cachedTile
	writeErr error      // the first tile that could not be written
}

type tileKey struct {
	l int
	n int64
}

type cachedTile struct {
	key  tileKey
	data []byte
}

type tileState struct {
	Leaves     int64 `json:"leaves"`      // a multiple of 256
	HeadOffset int64 `json:"head_offset"` // where head log line Leaves+1 starts
}

// tilePath is the C2SP path of tile (l, n), with width w (w < 256: partial).
func tilePath(l int, n int64, w int) string {
	s := strconv.FormatInt(n, 10)
	for len(s)%3 != 0 {
		s = "0" + s
	}
	var parts []string
	for i := 0; i < len(s); i += 3 {
		parts = append(parts, s[i:i+3])
	}
	for i := 0; i < len(parts)-1; i++ {
		parts[i] = "x" + parts[i]
	}
	p := "tile/" + strconv.Itoa(l) + "/" + strings.Join(parts, "/")
	if w > 0 && w < tileWidth {
		p += ".p/" + strconv.Itoa(w)
	}
	return p
}

// OpenTileTree opens the tree of the journal in dir: the full tiles on
// disk, then the head log's lines after them. It does not check the tiles
// against a checkpoint (CheckRoot does).
func OpenTileTree(dir string, log *slog.Logger) (*TileTree, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &TileTree{dir: filepath.Join(dir, tilesDir), log: log, cache: map[tileKey]*list.Element{}, lru: list.New()}
	var st tileState
	if b, err := os.ReadFile(filepath.Join(t.dir, tilesState)); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	if err := t.resume(dir, st); err != nil {
		log.Warn("journal: tiles unusable, rebuilding them from the head log", "err", err)
		return t.rebuild(dir)
	}
	return t, nil
}

// rebuild starts over from the head log alone.
func (t *TileTree) rebuild(dir string) (*TileTree, error) {
	if err := os.RemoveAll(t.dir); err != nil {
		return nil, err
	}
	fresh := &TileTree{dir: t.dir, log: t.log, cache: map[tileKey]*list.Element{}, lru: list.New()}
	if err := fresh.resume(dir, tileState{}); err != nil {
		return nil, err
	}
	return fresh, nil
}

// resume takes st's full tiles as they are, rebuilds the right edge above
// them, and appends the head log's lines from st.HeadOffset.
func (t *TileTree) resume(dir string, st tileState) error {
	if st.Leaves < 0 || st.Leaves%tileWidth != 0 || st.HeadOffset < 0 || (st.Leaves == 0) != (st.HeadOffset == 0) {
		return fmt.Errorf("tiles state %+v", st)
	}
	t.n, t.off, t.fullAt = st.Leaves, st.HeadOffset, st
	t.edge = nil
	// Levels above 0: the roots of the full tiles below that the
	// incomplete tile of each level holds.
	for l := 1; ; l++ {
		below := t.n >> (tileH * l) // full tiles at level l-1
		if below == 0 {
			break
		}
		t.level(l)
		for k := below / tileWidth * tileWidth; k < below; k++ {
			data, err := t.tile(l-1, k)
			if err != nil {
				return err
			}
			t.edge[l] = append(t.edge[l], tileRoot(data))
		}
	}
	t.level(0)
	f, err := os.Open(filepath.Join(dir, headFile))
	if errors.Is(err, os.ErrNotExist) {
		if t.n > 0 {
			return errors.New("tiles cover entries of a head log that is gone")
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	first := true
	var want string
	if t.n > 0 {
		want = `"seq":` + strconv.FormatInt(t.n+1, 10) + `,`
	}
	_, err = scanLines(f, bufio.NewReaderSize(f, 1<<20), func(line []byte, _ bool) error {
		if first && want != "" && !strings.Contains(string(line), want) {
			return fmt.Errorf("head log offset %d does not start entry %d", t.off, t.n+1)
		}
		first = false
		t.appendLine(line)
		return nil
	})
	if err != nil {
		return err
	}
	return t.writeErr
}

func (t *TileTree) level(l int) {
	for len(t.edge) <= l {
		t.edge = append(t.edge, make([]tlog.Hash, 0, tileWidth))
	}
}

// tileRoot is the root of the 256 hashes of a full tile.
func tileRoot(data []byte) tlog.Hash {
	hs := make([]tlog.Hash, tileWidth)
	for i := range hs {
		copy(hs[i][:], data[i*tlog.HashSize:])
	}
	for len(hs) > 1 {
		for i := 0; i < len(hs)/2; i++ {
			hs[i] = tlog.NodeHash(hs[2*i], hs[2*i+1])
		}
		hs = hs[:len(hs)/2]
	}
	return hs[0]
}

func encodeHashes(hs []tlog.Hash) []byte {
	b := make([]byte, 0, len(hs)*tlog.HashSize)
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// appendLine adds a head log line (without '\n') as the next leaf.
func (t *TileTree) appendLine(line []byte) {
	t.off += int64(len(line)) + 1
	t.add(tlog.RecordHash(line))
}

// add appends a leaf hash, writing every tile it completes.
func (t *TileTree) add(h tlog.Hash) {
	t.n++
	t.level(0)
	t.edge[0] = append(t.edge[0], h)
	if len(t.edge[0]) == tileWidth {
		t.fullAt = tileState{Leaves: t.n, HeadOffset: t.off}
		if (t.n>>tileH)%stateEvery == 0 {
			defer t.saveState() // once the tiles it completes are all written
		}
	}
	for l := 0; len(t.edge[l]) == tileWidth; l++ {
		n := (t.n >> (tileH * (l + 1))) - 1 // the tile just completed at level l
		data := encodeHashes(t.edge[l])
		t.writeTile(l, n, data)
		t.remember(tileKey{l, n}, data)
		t.level(l + 1)
		t.edge[l+1] = append(t.edge[l+1], tileRoot(data))
		t.edge[l] = t.edge[l][:0]
	}
}

// writeTile writes a full tile (temporary name, rename) and drops its
// partial tiles. A failure is kept (the tree is still right in memory)
// and makes the next open rebuild what is missing.
func (t *TileTree) writeTile(l int, n int64, data []byte) {
	p := filepath.Join(t.dir, tilePath(l, n, tileWidth))
	if err := writeFileAtomic(p, data); err != nil {
		if t.writeErr == nil {
			t.writeErr = err
			t.log.Error("journal: a tile could not be written; proofs still work, the next open rebuilds it", "tile", p, "err", err)
		}
		return
	}
	_ = os.RemoveAll(p + ".p")
}

func writeFileAtomic(p string, data []byte) error {
	tmp := p + ".tmp"
	err := os.WriteFile(tmp, data, fileMode)
	if errors.Is(err, os.ErrNotExist) { // the tile's folder is new
		if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
			return err
		}
		err = os.WriteFile(tmp, data, fileMode)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// saveState writes where the last full level-0 tile ends.
func (t *TileTree) saveState() {
	b, _ := json.Marshal(t.fullAt)
	if err := writeFileAtomic(filepath.Join(t.dir, tilesState), b); err != nil && t.writeErr == nil {
		t.writeErr = err
	}
}

// WritePartials writes the partial tile of every level, so the tiles of
// the tree's present size are all on disk (after a checkpoint of it), and
// the state.
func (t *TileTree) WritePartials() error {
	if t.fullAt.Leaves > 0 {
		t.saveState()
	}
	for l, e := range t.edge {
		if len(e) == 0 {
			continue
		}
		n := t.n >> (tileH * (l + 1))
		if err := writeFileAtomic(filepath.Join(t.dir, tilePath(l, n, len(e))), encodeHashes(e)); err != nil {
			return err
		}
	}
	return nil
}

// tile returns the data of full tile (l, n), from the cache or the disk.
func (t *TileTree) tile(l int, n int64) ([]byte, error) {
	k := tileKey{l, n}
	if el, ok := t.cache[k]; ok {
		t.lru.MoveToFront(el)
		return el.Value.(*cachedTile).data, nil
	}
	data, err := os.ReadFile(filepath.Join(t.dir, tilePath(l, n, tileWidth)))
	if err != nil {
		return nil, fmt.Errorf("journal: tile %d/%d: %w", l, n, err)
	}
	if len(data) != tileBytes {
		return nil, fmt.Errorf("journal: tile %d/%d: %d bytes", l, n, len(data))
	}
	t.remember(k, data)
	return data, nil
}

func (t *TileTree) remember(k tileKey, data []byte) {
	if el, ok := t.cache[k]; ok {
		el.Value.(*cachedTile).data = data
		t.lru.MoveToFront(el)
		return
	}
	t.cache[k] = t.lru.PushFront(&cachedTile{key: k, data: data})
	for t.lru.Len() > tileCacheSize {
		el := t.lru.Back()
		t.lru.Remove(el)
		delete(t.cache, el.Value.(*cachedTile).key)
	}
}

// ReadHashes implements tlog.HashReader from the tiles: each stored hash
// is read from (or computed within) the tile that holds it.
func (t *TileTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		tl := tlog.TileForIndex(tileH, x)
		var data []byte
		if full := t.n >> (tileH * (tl.L + 1)); tl.N < full {
			d, err := t.tile(tl.L, tl.N)
			if err != nil {
				return nil, err
			}
			data = d
		} else if tl.N == full && tl.L < len(t.edge) && len(t.edge[tl.L]) >= tl.W {
			data = encodeHashes(t.edge[tl.L][:tl.W])
		} else {
			return nil, fmt.Errorf("journal: tree: hash %d not stored", x)
		}
		h, err := tlog.HashFromTile(tl, data, x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// Size is the number of leaves.
func (t *TileTree) Size() int64 { return t.n }

// Root returns the tree hash of the first n leaves.
func (t *TileTree) Root(n int64) (tlog.Hash, error) { return rootOf(t, n) }

// ConsistencyProof proves that the tree of size old is a prefix of the
// tree of size n.
func (t *TileTree) ConsistencyProof(old, n int64) (tlog.TreeProof, error) {
	return consistencyOf(t, old, n)
}

// InclusionProof proves that leaf i is in the tree of size n.
func (t *TileTree) InclusionProof(i, n int64) (tlog.RecordProof, error) {
	return inclusionOf(t, i, n)
}

// appendLines adds each '\n'-terminated line of b.
func (t *TileTree) appendLines(b []byte) {
	_ = eachLine(b, func(line []byte) error { t.appendLine(line); return nil })
}
