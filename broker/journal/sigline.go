package journal

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
)

// Where signatures live: a signed event line carries one more top-level
// member, "sig", holding a Signature. The event hash is computed without
// "hash" and without "sig", so signing changes no hash and no chain, and
// an unsigned journal is a valid journal. The line stays RFC 8785
// canonical: "sig" is inserted at its sorted place (after "seq").

// sealSigned returns line (a canonical event line from encodeEvent) with
// the member "sig" holding k's signature of hash.
func sealSigned(line []byte, hash string, k *SigningKey) ([]byte, error) {
	s := k.SignEvent(hash)
	val, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return insertMember(line, "sig", val)
}

// insertMember inserts "key":val into the canonical object line at its
// sorted place. key must not be present.
func insertMember(line []byte, key string, val []byte) ([]byte, error) {
	out, _, err := appendWithMember(make([]byte, 0, len(line)+len(key)+len(val)+4), line, key, val)
	return out, err
}

// appendWithMember appends line to dst with "key":val inserted at its
// sorted place, and returns the offset in the result (dst included) where
// val starts.
// key must not be present. On error dst is returned unchanged.
func appendWithMember(dst, line []byte, key string, val []byte) ([]byte, int, error) {
	var o obj
	if err := scanObject(line, &o); err != nil {
		return dst, 0, err
	}
	out := dst
	member := func() int {
		out = append(out, '"')
		out = append(out, key...)
		out = append(out, '"', ':')
		at := len(out)
		out = append(out, val...)
		return at
	}
	for i := 0; i < o.n; i++ {
		k := string(o.ms[i].key)
		if k == key {
			return dst, 0, fmt.Errorf("%w: member %q already present", ErrMalformed, key)
		}
		if k > key {
			out = append(out, line[:o.ms[i].start]...)
			at := member()
			out = append(out, ',')
			return append(out, line[o.ms[i].start:]...), at, nil
		}
	}
	if o.n == 0 {
		out = append(out, '{')
		at := member()
		return append(out, '}'), at, nil
	}
	end := o.ms[o.n-1].end
	out = append(out, line[:end]...)
	out = append(out, ',')
	at := member()
	return append(out, line[end:]...), at, nil
}

// sigSlot is a "sig" member value with its signature left blank:
// {"key_id":KEYID,"sig":"<88 bytes to fill>"}. The writer appends it to
// a line under the journal lock, in its final place, and fills the blank
// (sigB64Len bytes at sigSlotOff) later, off the lock's serial path: an
// Ed25519 signature is always 64 bytes, so its standard base64 is always
// 88 characters and the line's length and layout are known before it is
// signed. Filled, the bytes are exactly sealSigned's (base64 and hex need
// no JSON escaping).
type sigSlot struct {
	val []byte
	off int // where the base64 signature goes within val
}

const sigB64Len = 88 // base64.StdEncoding.EncodedLen(ed25519.SignatureSize)

func newSigSlot(k *SigningKey) sigSlot {
	pre := `{"key_id":"` + k.id + `","sig":"`
	val := make([]byte, 0, len(pre)+sigB64Len+2)
	val = append(val, pre...)
	for range sigB64Len {
		val = append(val, '=')
	}
	val = append(val, '"', '}')
	return sigSlot{val: val, off: len(pre)}
}

// fillSig writes k's signature of hash, base64, into dst (sigB64Len bytes).
func fillSig(dst []byte, hash string, k *SigningKey) {
	base64.StdEncoding.Encode(dst[:sigB64Len], k.sign(Statement(hash, k.id)))
}

// hashWithoutTwo returns the journal hash of object b without members i
// and j (both present): the members kept are joined as a canonical
// object would join them and canonicalised when needed.
func hashWithoutTwo(buf, b []byte, o *obj, i, j int) ([32]byte, []byte, error) {
	buf = append(buf[:0], '{')
	first := true
	for k := 0; k < o.n; k++ {
		if k == i || k == j {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, b[o.ms[k].start:o.ms[k].end]...)
	}
	buf = append(buf, '}')
	if canon.IsCanonical(buf) {
		return sha256.Sum256(buf), buf, nil
	}
	c, err := jcs.Transform(buf)
	if err != nil {
		return [32]byte{}, buf, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return sha256.Sum256(c), buf, nil
}

// parseSig decodes a "sig" member's value strictly: an object with
// exactly key_id and sig, both strings.
func parseSig(v []byte) (Signature, error) {
	var o obj
	var s Signature
	if err := scanObject(v, &o); err != nil {
		return s, err
	}
	if o.n != 2 {
		return s, fmt.Errorf("%w: sig needs exactly key_id and sig", ErrMalformed)
	}
	for i := 0; i < o.n; i++ {
		var err error
		switch string(o.ms[i].key) {
		case "key_id":
			s.KeyID, err = parseString(o.ms[i].val)
		case "sig":
			s.Sig, err = parseString(o.ms[i].val)
		default:
			err = fmt.Errorf("%w: unknown sig member %q", ErrMalformed, o.ms[i].key)
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// LineSignature returns the signature of an event line and whether it has
// one. It does not verify it.
func LineSignature(line []byte) (Signature, bool, error) {
	v, ok := lookup(line, "sig")
	if !ok {
		return Signature{}, false, nil
	}
	s, err := parseSig(v)
	return s, err == nil, err
}
