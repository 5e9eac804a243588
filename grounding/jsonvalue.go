package grounding

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// maxDepth bounds how deeply a request body or record may nest.
const maxDepth = 512

var (
	errInvalidJSON = errors.New("not one valid JSON value")
	errTooDeep     = errors.New("nested too deeply")
)

// jsonDoc is a JSON document decoded without floating point (numbers are
// json.Number) and with every object key that appears twice noted, since
// encoding/json would silently keep the last one.
type jsonDoc struct {
	root any
	// dups are the keys that appear more than once in one object, by
	// path from the root ("request.json" or a binding's name).
	dups []dupKey
}

type dupKey struct {
	raw   string // the path as a field path names it
	shown string // the same with unusual keys elided, for a failure
}

// decodeJSON reads exactly one JSON value from data. prefix names the
// root in dups. The value is decoded by encoding/json (UseNumber); the
// repeated keys it would hide are found by a scan of the same bytes, which
// json.Valid has checked first.
func decodeJSON(data []byte, prefix string) (jsonDoc, error) {
	if !json.Valid(data) {
		return jsonDoc{}, errInvalidJSON
	}
	s := dupScanner{data: data, prefix: prefix}
	if err := s.value(0); err != nil {
		return jsonDoc{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return jsonDoc{}, errInvalidJSON
	}
	return jsonDoc{root: root, dups: s.dups}, nil
}

// dupScanner walks valid JSON and records keys repeated in one object.
// Keys are compared after unescaping, as encoding/json compares them.
type dupScanner struct {
	data   []byte
	i      int
	prefix string
	path   []pathStep // the keys and indexes leading to the value being read
	dups   []dupKey
}

type pathStep struct {
	key   []byte
	index int // -1: key
}

func (s *dupScanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *dupScanner) value(depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	s.ws()
	if s.i >= len(s.data) {
		return errInvalidJSON
	}
	switch s.data[s.i] {
	case '{':
		return s.object(depth)
	case '[':
		s.i++
		s.ws()
		if s.i < len(s.data) && s.data[s.i] == ']' {
			s.i++
			return nil
		}
		for n := 0; ; n++ {
			s.path = append(s.path, pathStep{index: n})
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.path = s.path[:len(s.path)-1]
			s.ws()
			if s.i >= len(s.data) {
				return errInvalidJSON
			}
			c := s.data[s.i]
			s.i++
			if c == ']' {
				return nil
			}
		}
	case '"':
		_, err := s.str()
		return err
	default:
		for s.i < len(s.data) && !strings.ContainsRune(",]} \t\n\r", rune(s.data[s.i])) {
			s.i++
		}
		return nil
	}
}

func (s *dupScanner) object(depth int) error {
	s.i++ // {
	var keys [][]byte
	for {
		s.ws()
		if s.i >= len(s.data) {
			return errInvalidJSON
		}
		if s.data[s.i] == '}' {
			s.i++
			return nil
		}
		if s.data[s.i] == ',' {
			s.i++
			continue
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		s.i++ // :
		s.path = append(s.path, pathStep{key: k, index: -1})
		if err := s.value(depth + 1); err != nil {
			return err
		}
		for _, prev := range keys {
			if bytes.Equal(prev, k) {
				s.dups = append(s.dups, s.dupKey())
				break
			}
		}
		keys = append(keys, k)
		s.path = s.path[:len(s.path)-1]
	}
}

// str reads a string at s.i and returns its unescaped bytes.
func (s *dupScanner) str() ([]byte, error) {
	start := s.i
	s.i++ // opening quote
	escaped := false
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			s.i++
			raw := s.data[start:s.i]
			if !escaped {
				return raw[1 : len(raw)-1], nil
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, errInvalidJSON
			}
			return []byte(out), nil
		}
		s.i++
	}
	return nil, errInvalidJSON
}

func (s *dupScanner) dupKey() dupKey {
	var raw, shown strings.Builder
	raw.WriteString(s.prefix)
	shown.WriteString(s.prefix)
	for _, st := range s.path {
		if st.index >= 0 {
			idx := "[" + strconv.Itoa(st.index) + "]"
			raw.WriteString(idx)
			shown.WriteString(idx)
			continue
		}
		raw.WriteByte('.')
		raw.Write(st.key)
		shown.WriteByte('.')
		shown.WriteString(displayKey(string(st.key)))
	}
	return dupKey{raw.String(), shown.String()}
}
