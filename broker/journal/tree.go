package journal

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"
)

// Tree is the RFC 6962 Merkle tree over the head log: leaf i (0-based) is
// the head log's line i+1, its bytes without the trailing '\n', hashed as
// tlog.RecordHash (SHA-256 of 0x00 and the line). It keeps every stored
// hash (tlog's layout, about two per leaf) in memory: 64 bytes per head
// entry. A Tree is not safe for concurrent use; the Writer guards its own.
type Tree struct {
	hashes []tlog.Hash
	n      int64
}

// ReadHashes implements tlog.HashReader.
func (t *Tree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.hashes)) {
			return nil, fmt.Errorf("journal: tree: hash %d not stored", x)
		}
		out[i] = t.hashes[x]
	}
	return out, nil
}

// Append adds a leaf: one head log line, without '\n'.
func (t *Tree) Append(line []byte) { t.AppendHash(tlog.RecordHash(line)) }

// AppendHash adds a leaf by its record hash.
func (t *Tree) AppendHash(h tlog.Hash) {
	hs, err := tlog.StoredHashesForRecordHash(t.n, h, t)
	if err != nil {
		panic(err) // cannot happen: every hash it reads was stored before
	}
	t.hashes = append(t.hashes, hs...)
	t.n++
}

// Size is the number of leaves.
func (t *Tree) Size() int64 { return t.n }

// Root returns the tree hash of the first n leaves.
func (t *Tree) Root(n int64) (tlog.Hash, error) { return rootOf(t, n) }

// ConsistencyProof proves that the tree of size old is a prefix of the
// tree of size n.
func (t *Tree) ConsistencyProof(old, n int64) (tlog.TreeProof, error) {
	return consistencyOf(t, old, n)
}

// InclusionProof proves that leaf i is in the tree of size n.
func (t *Tree) InclusionProof(i, n int64) (tlog.RecordProof, error) {
	return inclusionOf(t, i, n)
}

// hashTree is a tree whose stored hashes can be read: a Tree in memory, a
// TileTree on disk.
type hashTree interface {
	tlog.HashReader
	Size() int64
}

func rootOf(t hashTree, n int64) (tlog.Hash, error) {
	if n < 0 || n > t.Size() {
		return tlog.Hash{}, fmt.Errorf("%w: tree of %d leaves has no size %d", ErrBadProofRequest, t.Size(), n)
	}
	return tlog.TreeHash(n, t)
}

func consistencyOf(t hashTree, old, n int64) (tlog.TreeProof, error) {
	if old < 1 || old > n || n > t.Size() {
		return nil, fmt.Errorf("%w: no consistency proof from %d to %d in a tree of %d", ErrBadProofRequest, old, n, t.Size())
	}
	return tlog.ProveTree(n, old, t)
}

func inclusionOf(t hashTree, i, n int64) (tlog.RecordProof, error) {
	if i < 0 || i >= n || n > t.Size() {
		return nil, fmt.Errorf("%w: no inclusion proof of leaf %d in a tree of %d", ErrBadProofRequest, i, n)
	}
	return tlog.ProveRecord(n, i, t)
}

// ErrBadProofRequest: a proof or root asked for sizes the tree does not have.
var ErrBadProofRequest = errors.New("journal: no such proof")

// appendLines adds each '\n'-terminated line of b.
func (t *Tree) appendLines(b []byte) {
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		t.Append(b[:i])
		if i == len(b) {
			return
		}
		b = b[i+1:]
	}
}

// ReadHeadLines calls fn with each complete line of the head log of the
// journal in dir, in order, without '\n'. A partial last line is not
// passed. Lines longer than MaxLineBytes are passed truncated; they make
// the tree differ, as they should.
func ReadHeadLines(dir string, fn func(line []byte) error) error {
	f, err := OpenRegular(filepath.Join(dir, headFile))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = scanLines(f, bufio.NewReaderSize(f, 1<<20), func(line []byte, _ bool) error { return fn(line) })
	return err
}

// BuildTree reads the head log of the journal in dir into a Tree.
func BuildTree(dir string) (*Tree, error) {
	t := &Tree{}
	err := ReadHeadLines(dir, func(line []byte) error { t.Append(line); return nil })
	if err != nil {
		return nil, fmt.Errorf("journal: head log: %w", err)
	}
	return t, nil
}
