package browser

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
)

// wsStats is what countFrames found in a page's WebSocket stream.
type wsStats struct {
	frames int64  // data frames: text, binary and continuation
	bytes  int64  // their payload bytes
	digest string // "sha256:<hex>" over the unmasked payloads in order; "" for none
}

// errFrame: the stream is not RFC 6455 client framing.
var errFrame = errors.New("browser: malformed WebSocket frame")

// countFrames reads client-to-server WebSocket frames (RFC 6455 section
// 5.2) from r until EOF or a malformed frame, and returns the data frames'
// count, payload size and digest. Payloads are unmasked as they stream
// through the hash; nothing is buffered beyond a frame header, whatever
// length a frame claims. The stream is untrusted (the page writes it): a
// malformed frame ends the count with errFrame and what was counted so far.
func countFrames(r io.Reader) (wsStats, error) {
	br := bufio.NewReader(r)
	h := sha256.New()
	var st wsStats
	finish := func(err error) (wsStats, error) {
		if st.frames > 0 || st.bytes > 0 {
			st.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return st, err
	}
	var hdr [8]byte
	buf := make([]byte, 4096)
	for {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = errFrame
			}
			return finish(err)
		}
		opcode := hdr[0] & 0x0f
		masked := hdr[1]&0x80 != 0
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(br, hdr[:2]); err != nil {
				return finish(errFrame)
			}
			n = uint64(binary.BigEndian.Uint16(hdr[:2]))
		case 127:
			if _, err := io.ReadFull(br, hdr[:8]); err != nil {
				return finish(errFrame)
			}
			n = binary.BigEndian.Uint64(hdr[:8])
			if n>>63 != 0 {
				return finish(errFrame)
			}
		}
		var key [4]byte
		if masked {
			if _, err := io.ReadFull(br, key[:]); err != nil {
				return finish(errFrame)
			}
		}
		data := opcode <= 2 // continuation, text, binary
		if opcode >= 8 && n > 125 {
			return finish(errFrame) // control frames carry at most 125 bytes
		}
		if data {
			st.frames++
		}
		var off uint64
		for off < n {
			chunk := buf[:min(uint64(len(buf)), n-off)]
			k, err := io.ReadFull(br, chunk)
			if masked {
				for i := range chunk[:k] {
					chunk[i] ^= key[(off+uint64(i))%4]
				}
			}
			if data {
				h.Write(chunk[:k])
				st.bytes += int64(k)
			}
			off += uint64(k)
			if err != nil {
				return finish(errFrame)
			}
		}
	}
}
