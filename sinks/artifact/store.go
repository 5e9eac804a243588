package artifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

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
	// Delete removes the artifact and reports whether there was one.
	Delete(ctx context.Context, name string) (existed bool, err error)
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
	obs    jetstream.ObjectStore
	stream jetstream.Stream // the bucket's, to purge a deleted object's marker
	bucket string
	quota  register // kvRegister on the bucket's quota KV
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
	stream, err := js.Stream(ctx, "OBJ_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("artifact object store %s: %w", cfg.Bucket, err)
	}
	reg, err := openKVRegister(ctx, js, cfg.Bucket+"_quota", cfg.Replicas)
	if err != nil {
		return nil, fmt.Errorf("artifact object store %s: %w", cfg.Bucket, err)
	}
	return &ObjectStore{obs: obs, stream: stream, bucket: cfg.Bucket, quota: reg}, nil
}

// Delete implements Store. The object's chunks go, and so does the marker
// the Object Store leaves in their place, so nothing holds room.
func (o *ObjectStore) Delete(ctx context.Context, name string) (bool, error) {
	if err := o.obs.Delete(ctx, name); err != nil {
		if err = natsError("delete", err); errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	meta := "$O." + o.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
	if err := o.stream.Purge(ctx, jetstream.WithPurgeSubject(meta)); err != nil {
		return true, natsError("delete", err)
	}
	return true, nil
}

// size implements quotaStore.
func (o *ObjectStore) size(ctx context.Context, name string) (int64, bool, error) {
	info, err := o.obs.GetInfo(ctx, name)
	if err != nil {
		if err = natsError("read", err); errors.Is(err, ErrNotFound) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return int64(info.Size), true, nil
}

// tenantBytes implements quotaStore.
func (o *ObjectStore) tenantBytes(ctx context.Context, tenant string) (int64, error) {
	infos, err := o.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, natsError("read", err)
	}
	var n int64
	for _, info := range infos {
		if !info.Deleted && strings.HasPrefix(info.Name, tenant+"/") {
			n += Cost(info.Name, int64(info.Size))
		}
	}
	return n, nil
}

func (o *ObjectStore) register() register { return o.quota }

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
	root  *os.Root
	quota register // dirRegister under .quota
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
	return &DirStore{root: root, quota: dirRegister{root: root}}, nil
}

// Delete implements Store.
func (d *DirStore) Delete(_ context.Context, name string) (bool, error) {
	err := d.root.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: delete: %v", ErrStore, err)
	}
	if err := d.root.Remove(path.Join(metaDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("%w: delete: %v", ErrStore, err)
	}
	return true, nil
}

// size implements quotaStore.
func (d *DirStore) size(_ context.Context, name string) (int64, bool, error) {
	fi, err := d.root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: read: %v", ErrStore, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, false, nil
	}
	return fi.Size(), true, nil
}

// tenantBytes implements quotaStore.
func (d *DirStore) tenantBytes(_ context.Context, tenant string) (int64, error) {
	var n int64
	err := fs.WalkDir(d.root.FS(), tenant, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && !strings.HasPrefix(path.Base(p), "~") {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n += Cost(p, fi.Size())
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: read: %v", ErrStore, err)
	}
	return n, nil
}

func (d *DirStore) register() register { return d.quota }

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
