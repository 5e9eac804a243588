package canon

import "unicode/utf8"

// IsCanonical reports whether b is already in RFC 8785 canonical form, for
// the common shapes journal lines have: objects with ASCII member names,
// arrays, strings, safe integers and literals. It returns false for
// anything else, including valid canonical JSON outside those shapes; the
// caller then runs the full canonicaliser. It never returns true for
// input the canonicaliser would change or reject (FuzzIsCanonical checks).
func IsCanonical(b []byte) bool {
	end, ok := canonValue(b, 0, 0)
	return ok && end == len(b)
}

const canonMaxDepth = 64

func canonValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{':
		return canonObject(b, i, depth+1)
	case c == '[':
		return canonArray(b, i, depth+1)
	case c == '"':
		return canonString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return canonInt(b, i)
	case c == 't':
		return canonLit(b, i, "true")
	case c == 'f':
		return canonLit(b, i, "false")
	case c == 'n':
		return canonLit(b, i, "null")
	}
	return 0, false
}

func canonLit(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// canonInt accepts an integer of at most 15 digits (below 2^53, so it
// prints as itself), without a leading zero, and not -0.
func canonInt(b []byte, i int) (int, bool) {
	j := i
	if b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	n := j - start
	switch {
	case n == 0 || n > 15:
		return 0, false
	case b[start] == '0' && (n > 1 || start > i): // 01, -0
		return 0, false
	case j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E'):
		return 0, false
	}
	return j, true
}

// canonString accepts a string whose escapes are exactly those RFC 8785
// writes and whose content is valid UTF-8.
func canonString(b []byte, i int) (int, bool) {
	j := i + 1
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false
			}
			switch b[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				// Only control characters without a short escape.
				if j+5 >= len(b) || string(b[j+2:j+4]) != "00" {
					return 0, false
				}
				h := b[j+4]
				l := b[j+5]
				if h != '0' && h != '1' || !(l >= '0' && l <= '9' || l >= 'a' && l <= 'f') {
					return 0, false
				}
				switch v := (h-'0')<<4 | hexVal(l); v {
				case '\b', '\f', '\n', '\r', '\t':
					return 0, false
				}
				j += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

func hexVal(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

func canonArray(b []byte, i, depth int) (int, bool) {
	if depth > canonMaxDepth {
		return 0, false
	}
	j := i + 1
	if j < len(b) && b[j] == ']' {
		return j + 1, true
	}
	for {
		var ok bool
		if j, ok = canonValue(b, j, depth); !ok || j >= len(b) {
			return 0, false
		}
		switch b[j] {
		case ',':
			j++
		case ']':
			return j + 1, true
		default:
			return 0, false
		}
	}
}

// canonObject accepts an object whose member names are ASCII, escape
// free, and strictly increasing (byte order equals UTF-16 order for
// ASCII).
func canonObject(b []byte, i, depth int) (int, bool) {
	if depth > canonMaxDepth {
		return 0, false
	}
	j := i + 1
	if j < len(b) && b[j] == '}' {
		return j + 1, true
	}
	var prev []byte
	for {
		if j >= len(b) || b[j] != '"' {
			return 0, false
		}
		k := j + 1
		for k < len(b) && b[k] != '"' {
			if c := b[k]; c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
				return 0, false
			}
			k++
		}
		if k >= len(b) {
			return 0, false
		}
		key := b[j+1 : k]
		if prev != nil && string(key) <= string(prev) {
			return 0, false
		}
		prev = key
		if k+1 >= len(b) || b[k+1] != ':' {
			return 0, false
		}
		var ok bool
		if j, ok = canonValue(b, k+2, depth); !ok || j >= len(b) {
			return 0, false
		}
		switch b[j] {
		case ',':
			j++
		case '}':
			return j + 1, true
		default:
			return 0, false
		}
	}
}
