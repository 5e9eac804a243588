package browser

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// frame builds one client frame: masked with key when key is not nil.
func frame(opcode byte, payload []byte, key []byte) []byte {
	out := []byte{0x80 | opcode}
	mask := byte(0)
	if key != nil {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, mask|byte(n))
	case n < 1<<16:
		out = append(out, mask|126, byte(n>>8), byte(n))
	default:
		out = append(out, mask|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	if key == nil {
		return append(out, payload...)
	}
	out = append(out, key...)
	for i, b := range payload {
		out = append(out, b^key[i%4])
	}
	return out
}

func TestCountFrames(t *testing.T) {
	key := []byte{1, 2, 3, 4}
	big := bytes.Repeat([]byte("x"), 70000)
	var stream []byte
	stream = append(stream, frame(1, []byte("hello"), key)...)
	stream = append(stream, frame(9, []byte("ping"), key)...) // control: not counted
	stream = append(stream, frame(2, big, key)...)
	stream = append(stream, frame(1, []byte("mid"), nil)...)
	st, err := countFrames(bytes.NewReader(stream))
	want := sha256.Sum256(append(append([]byte("hello"), big...), "mid"...))
	if err != nil || st.frames != 3 || st.bytes != int64(5+len(big)+3) || st.digest != "sha256:"+hex.EncodeToString(want[:]) {
		t.Fatalf("countFrames = %+v, %v", st, err)
	}
	if st, err := countFrames(bytes.NewReader(nil)); err != nil || st.frames != 0 || st.digest != "" {
		t.Fatalf("empty stream: %+v, %v", st, err)
	}
	for _, bad := range [][]byte{
		{0x81},                                  // a header cut short
		{0x81, 0x85, 1, 2},                      // a mask key cut short
		{0x81, 0x05, 'a'},                       // a payload cut short
		{0x89, 0xfe, 0, 200},                    // a control frame over 125 bytes
		{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, // a length with the top bit set
	} {
		if _, err := countFrames(bytes.NewReader(bad)); !errors.Is(err, errFrame) {
			t.Errorf("%x: err = %v, want errFrame", bad, err)
		}
	}
}

// FuzzCountFrames: the page writes the stream, so any bytes must end in a
// count or errFrame, never a panic, and never more payload than was given.
func FuzzCountFrames(f *testing.F) {
	f.Add(frame(1, []byte("hello"), []byte{1, 2, 3, 4}))
	f.Add(append(frame(2, bytes.Repeat([]byte{7}, 300), nil), frame(8, nil, []byte{0, 0, 0, 0})...))
	f.Add([]byte{0x82, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := countFrames(bytes.NewReader(data))
		if err != nil && !errors.Is(err, errFrame) {
			t.Fatalf("error %v is not errFrame", err)
		}
		if st.bytes > int64(len(data)) || st.frames > int64(len(data)) {
			t.Fatalf("counted %+v from %d bytes", st, len(data))
		}
	})
}
