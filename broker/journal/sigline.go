package journal

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
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
	var o obj
	if err := scanObject(line, &o); err != nil {
		return nil, err
	}
	m := append([]byte(`"`+key+`":`), val...)
	out := make([]byte, 0, len(line)+len(m)+1)
	for i := 0; i < o.n; i++ {
		k := string(o.ms[i].key)
		if k == key {
			return nil, fmt.Errorf("%w: member %q already present", ErrMalformed, key)
		}
		if k > key {
			out = append(out, line[:o.ms[i].start]...)
			out = append(out, m...)
			out = append(out, ',')
			return append(out, line[o.ms[i].start:]...), nil
		}
	}
	if o.n == 0 {
		return append(append(append(out, '{'), m...), '}'), nil
	}
	end := o.ms[o.n-1].end
	out = append(out, line[:end]...)
	out = append(out, ',')
	out = append(out, m...)
	return append(out, line[end:]...), nil
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
	if isCanonical(buf) {
		return sha256.Sum256(buf), buf, nil
	}
	canon, err := jcs.Transform(buf)
	if err != nil {
		return [32]byte{}, buf, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return sha256.Sum256(canon), buf, nil
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
