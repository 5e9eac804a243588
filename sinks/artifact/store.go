package artifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// Store keeps artifacts by name ("<tenant>/<key>", already validated).
// Implementations must be safe for concurrent use.
type Store interface {
	// Put stores data under name, replacing what was there, and returns
	// once the store holds it.
	Put(ctx context.Context, name, contentType string, data []byte) error
	// Get returns the artifact and its content type; ErrNotFound when there
	// is none, ErrTooLarge when it is larger than max bytes.
	Get(ctx context.Context, name string, max int64) (data []byte, contentType string, err error)
}

// Errors of the stores. The journal records their type (not-found,
// too-large, store-unavailable, store-error), never a message.
var (
	ErrNotFound    = broker.NewOutcomeError("not-found", "artifact not found")
	ErrTooLarge    = broker.NewOutcomeError("too-large", "artifact too large to return in a reply")
	ErrUnavailable = broker.NewOutcomeError("store-unavailable", "artifact store unavailable")
	ErrStore       = broker.NewOutcomeError("store-error", "artifact store failed")
)

// ObjectStoreConfig configures OpenObjectStore. The zero value is useful.
type ObjectStoreConfig struct {
	Bucket   string // "" is subject.ArtifactBucket
	Replicas int    // 0 is 1; use 3 on a cluster
	MaxBytes int64  // total bucket size; 0 is unlimited
}

// ObjectStore keeps artifacts in a NATS JetStream Object Store, with the
// content type as the object's Content-Type header. Safe for concurrent
// use.
type ObjectStore struct {
	obs jetstream.ObjectStore
}

var _ Store = (*ObjectStore)(nil)

// OpenObjectStore creates or updates the bucket and returns the store.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, cfg ObjectStoreConfig) (*ObjectStore, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = subject.ArtifactBucket
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      cfg.Bucket,
		Description: "Gatehouse artifacts, named <tenant>/<key>",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxBytes:    cfg.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("artifact object store %s: %w", cfg.Bucket, err)
	}
	return &ObjectStore{obs: obs}, nil
}

// Put implements Store.
func (o *ObjectStore) Put(ctx context.Context, name, contentType string, data []byte) error {
	meta := jetstream.ObjectMeta{Name: name, Headers: nats.Header{"Content-Type": []string{contentType}}}
	if _, err := o.obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return natsError("publish", err)
	}
	return nil
}

// Get implements Store.
func (o *ObjectStore) Get(ctx context.Context, name string, max int64) ([]byte, string, error) {
	info, err := o.obs.GetInfo(ctx, name)
	if err != nil {
		return nil, "", natsError("read", err)
	}
	if info.Size > uint64(max) {
		return nil, "", fmt.Errorf("%w: it is %d bytes, the limit is %d", ErrTooLarge, info.Size, max)
	}
	r, err := o.obs.Get(ctx, name)
	if err != nil {
		return nil, "", natsError("read", err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, "", natsError("read", err)
	}
	if int64(len(data)) > max {
		return nil, "", fmt.Errorf("%w: it grew past %d bytes while read", ErrTooLarge, max)
	}
	ct := DefaultContentType
	if got, err := r.Info(); err == nil && got.Headers.Get("Content-Type") != "" {
		ct = got.Headers.Get("Content-Type")
	}
	return data, ct, nil
}

func natsError(op string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return ErrNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, jetstream.ErrBucketNotFound):
		return fmt.Errorf("%w: %s: %v; check that NATS JetStream is up and the artifact bucket exists, then retry", ErrUnavailable, op, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrStore, op, err)
}

// metaDir holds each artifact's content type at the same name. No tenant
// segment starts with '.', so it never meets a tenant's artifacts.
const metaDir = ".meta"

// DirStore keeps artifacts as files under a folder, each at its name, with
// the content type kept under .meta/<name>. Every access goes through
// os.Root, so no name or symbolic link reaches outside the folder. Files
// are written to a temporary name, synced and renamed into place, so a
// reader sees the old or the new artifact, never part of one. Folders are
// 0750, files 0640. Safe for concurrent use; Close releases the folder.
//
// A key that is a prefix folder of another ("a" and "a/b") cannot be kept
// in one tenant: the second publish fails with store-error.
type DirStore struct {
	root *os.Root
}

var _ Store = (*DirStore)(nil)

// OpenDir creates dir if needed and returns the store over it.
func OpenDir(dir string) (*DirStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("artifact folder: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact folder: %w", err)
	}
	return &DirStore{root: root}, nil
}

// Close releases the folder.
func (d *DirStore) Close() error { return d.root.Close() }

// Put implements Store.
func (d *DirStore) Put(_ context.Context, name, contentType string, data []byte) error {
	if err := writeFile(d.root, path.Join(metaDir, name), []byte(contentType)); err != nil {
		return fmt.Errorf("%w: publish: %v", ErrStore, err)
	}
	if err := writeFile(d.root, name, data); err != nil {
		return fmt.Errorf("%w: publish: %v", ErrStore, err)
	}
	return nil
}

// Get implements Store.
func (d *DirStore) Get(_ context.Context, name string, max int64) ([]byte, string, error) {
	f, err := d.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", ErrNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: read: %v", ErrStore, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("%w: read: %v", ErrStore, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", ErrNotFound
	}
	if fi.Size() > max {
		return nil, "", fmt.Errorf("%w: it is %d bytes, the limit is %d", ErrTooLarge, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: read: %v", ErrStore, err)
	}
	if int64(len(data)) > max {
		return nil, "", fmt.Errorf("%w: it grew past %d bytes while read", ErrTooLarge, max)
	}
	ct := DefaultContentType
	if b, err := d.root.ReadFile(path.Join(metaDir, name)); err == nil && len(b) > 0 {
		ct = string(b)
	}
	return data, ct, nil
}

// writeFile writes data to name under root through a synced temporary file
// renamed into place, then syncs the folder. The temporary name starts with
// '~', which no key may contain.
func writeFile(root *os.Root, name string, data []byte) error {
	dir := path.Dir(name)
	if err := root.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, "~tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	df, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
