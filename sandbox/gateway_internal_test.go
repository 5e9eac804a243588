package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzReadLine: the gateway's line reader gives back every line of its input, in order, without its newline
// and one trailing \r, marks exactly the lines over the limit as too long, and never returns more than the
// limit.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{"", "\n", "{}\n", "a\r\nb\n", "partial", "x\n\n\ny", "12345678\n123456789\n", "\r\n\r\r\n"} {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 0 || max > 64 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(in), 16) // smaller than some lines: ReadSlice fills up
		lines := bytes.SplitAfter(in, []byte("\n"))
		if len(lines) > 0 && !bytes.HasSuffix(lines[len(lines)-1], []byte("\n")) {
			lines = lines[:len(lines)-1] // a partial last line is dropped
		}
		for i, want := range lines {
			want = bytes.TrimSuffix(bytes.TrimSuffix(want, []byte("\n")), []byte("\r"))
			got, tooLong, err := readLine(br, max)
			if err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			if tooLong != (len(want) > max) || (!tooLong && !bytes.Equal(got, want)) || len(got) > max {
				t.Fatalf("line %d = %q (too long %v), want %q under %d", i, got, tooLong, want, max)
			}
		}
		if _, _, err := readLine(br, max); err == nil {
			t.Fatal("read past the last line")
		}
	})
}

// FuzzCompactReply: whatever a Gateway func returns, the program gets one line of JSON.
func FuzzCompactReply(f *testing.F) {
	for _, s := range []string{"{\n \"a\": [1,\n2]}", "", "not json", "{}{}", "\"\\u2028\"", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		b := compactReply(reply)
		if !json.Valid(b) || bytes.ContainsAny(b, "\r\n") {
			t.Fatalf("compactReply(%q) = %q", reply, b)
		}
	})
}
