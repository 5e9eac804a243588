package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
)

// Lines are written straight in RFC 8785 form: the members of an event and
// of a head entry are fixed and their order (UTF-16 order of their ASCII
// names) is known, so the writer appends them in that order, each value
// canonical, and never encodes a line to canonicalise it after. An event's
// data is canonical when it comes from this module's brokers (canon.Marshal);
// data that is not (an older broker) is canonicalised once.

// canonicalData returns e's data in canonical form.
func canonicalData(d json.RawMessage) ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	if canon.IsCanonical(d) {
		return d, nil
	}
	c, err := jcs.Transform(d)
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrInvalidEvent, err)
	}
	return c, nil
}

// appendEvent appends e's line with data (canonical) to dst: with the
// member "hash" when hash is not "", and the member "sig" holding sig when
// sig is not nil, at their sorted places; it returns where sig's value
// starts (-1 without one). Members: data, effect, hash, id, prev, run,
// seq, sig, time, type, v.
func appendEvent(dst []byte, e *Event, data []byte, hash string, sig []byte) ([]byte, int, error) {
	dst = append(dst, `{"data":`...)
	dst = append(dst, data...)
	if e.Effect != "" {
		dst = append(dst, `,"effect":`...)
		dst = canon.AppendString(dst, e.Effect)
	}
	if hash != "" {
		dst = append(dst, `,"hash":"`...)
		dst = append(dst, hash...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"id":`...)
	dst = canon.AppendString(dst, e.ID)
	dst = append(dst, `,"prev":`...)
	dst = canon.AppendString(dst, e.Prev)
	dst = append(dst, `,"run":`...)
	dst = canon.AppendString(dst, e.Run)
	dst = append(dst, `,"seq":`...)
	dst = canon.AppendUint(dst, e.Seq)
	at := -1
	if sig != nil {
		dst = append(dst, `,"sig":`...)
		at = len(dst)
		dst = append(dst, sig...)
	}
	dst = append(dst, `,"time":`...)
	dst, err := canon.AppendTime(dst, e.Time)
	if err != nil {
		return dst, -1, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	dst = append(dst, `,"type":`...)
	dst = canon.AppendString(dst, string(e.Type))
	dst = append(dst, `,"v":`...)
	dst = strconv.AppendInt(dst, int64(e.V), 10)
	return append(dst, '}'), at, nil
}

// eventHash is the hash of e with data (canonical): SHA-256 of its line
// without "hash" and "sig". buf is scratch space, returned for reuse.
func eventHash(buf []byte, e *Event, data []byte) (string, []byte, error) {
	body, _, err := appendEvent(buf[:0], e, data, "", nil)
	if err != nil {
		return "", body, err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), body, nil
}

// Hash returns the hash of e as this package encodes it: lowercase hex
// SHA-256 of the RFC 8785 form of e without its "hash" member. e.Hash is
// ignored. A line written by the Writer has exactly this hash; for a line
// from elsewhere the hash is over the line's own bytes (see the package
// documentation), which Verify recomputes.
func Hash(e Event) (string, error) {
	data, err := canonicalData(e.Data)
	if err != nil {
		return "", err
	}
	h, _, err := eventHash(nil, &e, data)
	return h, err
}

// encodeEvent returns e's line (without '\n', unsigned) and its hash.
func encodeEvent(e Event) ([]byte, string, error) {
	data, err := canonicalData(e.Data)
	if err != nil {
		return nil, "", err
	}
	h, buf, err := eventHash(nil, &e, data)
	if err != nil {
		return nil, "", err
	}
	line, _, err := appendEvent(buf[len(buf):], &e, data, h, nil)
	return line, h, err
}

// appendHead appends h's line to dst, with "hash" when hash is not "".
// Members: event, hash, prev, run, run_seq, seq, time.
func appendHead(dst []byte, h *HeadEntry, hash string) ([]byte, error) {
	dst = append(dst, `{"event":`...)
	dst = canon.AppendString(dst, h.Event)
	if hash != "" {
		dst = append(dst, `,"hash":"`...)
		dst = append(dst, hash...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"prev":`...)
	dst = canon.AppendString(dst, h.Prev)
	dst = append(dst, `,"run":`...)
	dst = canon.AppendString(dst, h.Run)
	dst = append(dst, `,"run_seq":`...)
	dst = canon.AppendUint(dst, h.RunSeq)
	dst = append(dst, `,"seq":`...)
	dst = canon.AppendUint(dst, h.Seq)
	dst = append(dst, `,"time":`...)
	dst, err := canon.AppendTime(dst, h.Time)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// encodeHead returns h's line (without '\n') and its hash.
func encodeHead(h HeadEntry) ([]byte, string, error) {
	body, err := appendHead(nil, &h, "")
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	line, err := appendHead(body[len(body):], &h, hash)
	return line, hash, err
}
