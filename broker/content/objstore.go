package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ContentBucket is the NATS Object Store bucket OpenObjectStore uses by
// default.
const ContentBucket = "gatehouse_content"

// ObjectStoreConfig configures OpenObjectStore. The zero value is useful.
type ObjectStoreConfig struct {
	Bucket   string // "" is ContentBucket
	Replicas int    // 0 is 1; 3 on a cluster
	// Timeout bounds each call to the object store; 0 is 10 s.
	Timeout time.Duration
	Now     func() time.Time // nil is time.Now
	// Existing opens the bucket only when it exists, leaving its
	// configuration (replicas) as it is; a missing bucket is an error
	// wrapping jetstream.ErrBucketNotFound. For readers such as replay and
	// erasure, which must not create or reconfigure what serve made.
	Existing bool
}

// OpenObjectStore returns a Store kept in a NATS Object Store bucket
// (created if needed) instead of a folder, so every broker host of a
// cluster shares one content store and replay, evidence and erasure work
// from any of them. It behaves as a folder Store with these differences:
//
//   - A blob is the object "sha256/<hex>". Its last use is its metadata
//     "used" (RFC 3339), set when it is written and by Touch or a later
//     Put of the same bytes.
//   - The index keeps every reference, as the folder's index does: one
//     empty object "refs/<hex>/<key>" per distinct use (kind, run,
//     effect, person, name) of the blob <hex>, the Ref as JSON in its
//     metadata "ref". A use repeated (the same policy again) rewrites its
//     object with the later time. So ErasePerson leaves a blob another
//     person's run also references, exactly like the folder store.
//     Blobs written before refs/ existed carry their first reference in
//     their own metadata "ref"; Refs reads both.
//   - An erasure deletes the blob's object (JetStream purges its chunks)
//     and writes the object "erasures/<hex>" holding the Erasure as JSON.
//   - Dir is "" and Close does nothing.
//
// Safe for concurrent use by many processes on many hosts: two brokers
// storing the same blob write identical bytes.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, cfg ObjectStoreConfig) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = ContentBucket
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	var os jetstream.ObjectStore
	var err error
	if cfg.Existing {
		os, err = js.ObjectStore(ctx, cfg.Bucket)
	} else {
		os, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: cfg.Bucket, Description: "gatehouse journal content: what decisions depended on",
			Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("content: object store %s: %w", cfg.Bucket, err)
	}
	s := &Store{now: cfg.Now, obj: &objStore{os: os, timeout: cfg.Timeout}}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// objStore is the Object Store behind a Store; see OpenObjectStore.
type objStore struct {
	os      jetstream.ObjectStore
	timeout time.Duration
}

const (
	objBlobPrefix    = "sha256/"
	objErasurePrefix = "erasures/"
	objRefPrefix     = "refs/"
	metaUsed         = "used"
	metaRef          = "ref"
)

func objName(d string) (string, error) {
	if !ValidDigest(d) {
		return "", fmt.Errorf("%w: %q", ErrBadDigest, clip(d))
	}
	return objBlobPrefix + d[len("sha256:"):], nil
}

func (o *objStore) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), o.timeout)
}

func notFound(err error) bool {
	return errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrNoObjectsFound)
}

func (o *objStore) put(data []byte, ref Ref, now time.Time) (string, error) {
	d := DigestOf(data)
	name, _ := objName(d)
	ctx, cancel := o.ctx()
	defer cancel()
	ref.Digest, ref.Time = d, now.UTC()
	rb, err := json.Marshal(ref)
	if err != nil {
		return "", fmt.Errorf("content: %w", err)
	}
	info, err := o.os.GetInfo(ctx, name)
	switch {
	case err == nil:
		if err := o.markUsed(ctx, info, now); err != nil {
			return "", err
		}
	case !notFound(err):
		return "", fmt.Errorf("content: %w", err)
	default:
		meta := jetstream.ObjectMeta{Name: name, Metadata: map[string]string{metaUsed: now.UTC().Format(time.RFC3339Nano), metaRef: string(rb)}}
		if _, err := o.os.Put(ctx, meta, bytes.NewReader(data)); err != nil {
			return "", fmt.Errorf("content: write blob: %w", err)
		}
	}
	// The reference, after the blob: a reference never names a blob that
	// was not written.
	meta := jetstream.ObjectMeta{Name: refObjName(ref), Metadata: map[string]string{metaRef: string(rb)}}
	if _, err := o.os.Put(ctx, meta, strings.NewReader("")); err != nil {
		return "", fmt.Errorf("content: index: %w", err)
	}
	return d, nil
}

// refObjName is "refs/<hex>/<key>": key identifies the use (everything in
// the Ref but its time), so a repeated use rewrites one object.
func refObjName(r Ref) string {
	return objRefPrefix + r.Digest[len("sha256:"):] + "/" + refKey(r)
}

func refKey(r Ref) string {
	r.Time = time.Time{}
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

func (o *objStore) markUsed(ctx context.Context, info *jetstream.ObjectInfo, now time.Time) error {
	md := map[string]string{}
	for k, v := range info.Metadata {
		md[k] = v
	}
	md[metaUsed] = now.UTC().Format(time.RFC3339Nano)
	if err := o.os.UpdateMeta(ctx, info.Name, jetstream.ObjectMeta{Name: info.Name, Description: info.Description, Metadata: md}); err != nil {
		if notFound(err) {
			return fmt.Errorf("%w: %s", ErrNotFound, info.Name)
		}
		return fmt.Errorf("content: %w", err)
	}
	return nil
}

func (o *objStore) touch(d string, now time.Time) error {
	name, err := objName(d)
	if err != nil {
		return err
	}
	ctx, cancel := o.ctx()
	defer cancel()
	info, err := o.os.GetInfo(ctx, name)
	if notFound(err) {
		return fmt.Errorf("%w: %s", ErrNotFound, d)
	} else if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	return o.markUsed(ctx, info, now)
}

func (o *objStore) get(d string) ([]byte, error) {
	name, err := objName(d)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.ctx()
	defer cancel()
	b, err := o.os.GetBytes(ctx, name)
	if notFound(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	if err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	if DigestOf(b) != d {
		return b, fmt.Errorf("%w: %s", ErrChanged, d)
	}
	return b, nil
}

func usedOf(info *jetstream.ObjectInfo) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, info.Metadata[metaUsed]); err == nil {
		return t
	}
	return info.ModTime
}

func (o *objStore) lastUsed(d string) (time.Time, error) {
	name, err := objName(d)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := o.ctx()
	defer cancel()
	info, err := o.os.GetInfo(ctx, name)
	if notFound(err) {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, d)
	} else if err != nil {
		return time.Time{}, fmt.Errorf("content: %w", err)
	}
	return usedOf(info), nil
}

// list returns the live objects whose name starts with prefix.
func (o *objStore) list(prefix string) ([]*jetstream.ObjectInfo, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	all, err := o.os.List(ctx)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	out := all[:0]
	for _, info := range all {
		if strings.HasPrefix(info.Name, prefix) && !info.Deleted {
			out = append(out, info)
		}
	}
	return out, nil
}

func (o *objStore) blobs(fn func(d string, used time.Time)) error {
	infos, err := o.list(objBlobPrefix)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if d := "sha256:" + info.Name[len(objBlobPrefix):]; ValidDigest(d) {
			fn(d, usedOf(info))
		}
	}
	return nil
}

// refs lists every reference object, then the first reference kept in
// the metadata of blobs written before reference objects existed, each
// use once, oldest first.
func (o *objStore) refs() ([]Ref, error) {
	infos, err := o.list("")
	if err != nil {
		return nil, err
	}
	var out []Ref
	seen := map[string]bool{}
	add := func(info *jetstream.ObjectInfo) {
		var r Ref
		if json.Unmarshal([]byte(info.Metadata[metaRef]), &r) != nil || !ValidDigest(r.Digest) {
			return
		}
		if k := r.Digest + "/" + refKey(r); !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	for _, info := range infos {
		if strings.HasPrefix(info.Name, objRefPrefix) {
			add(info)
		}
	}
	for _, info := range infos {
		if strings.HasPrefix(info.Name, objBlobPrefix) {
			add(info)
		}
	}
	slices.SortStableFunc(out, func(a, b Ref) int { return a.Time.Compare(b.Time) })
	return out, nil
}

func (o *objStore) erasures() (map[string]Erasure, error) {
	infos, err := o.list(objErasurePrefix)
	if err != nil {
		return nil, err
	}
	out := map[string]Erasure{}
	ctx, cancel := o.ctx()
	defer cancel()
	for _, info := range infos {
		b, err := o.os.GetBytes(ctx, info.Name)
		if err != nil {
			continue // erased again meanwhile
		}
		var e Erasure
		if json.Unmarshal(b, &e) == nil && e.Digest != "" {
			out[e.Digest] = e
		}
	}
	return out, nil
}

func (o *objStore) erase(es []Erasure, now time.Time) ([]Erasure, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	var done []Erasure
	for _, e := range es {
		name, err := objName(e.Digest)
		if err != nil {
			return done, err
		}
		if err := o.os.Delete(ctx, name); notFound(err) {
			continue
		} else if err != nil {
			return done, fmt.Errorf("content: erase: %w", err)
		}
		e.Time = now
		b, _ := json.Marshal(e)
		if _, err := o.os.PutBytes(ctx, objErasurePrefix+e.Digest[len("sha256:"):], b); err != nil {
			return done, fmt.Errorf("content: erasure log: %w", err)
		}
		done = append(done, e)
	}
	return done, nil
}
