package grounding

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

type rootKind uint8

const (
	rootJSON    rootKind = iota + 1 // request.json: the JSON body
	rootForm                        // request.form: the form body
	rootQuery                       // request.query
	rootPath                        // request.path: a match path placeholder
	rootInput                       // input: the caller's structured input
	rootBinding                     // a binding's record
)

func (k rootKind) isRequest() bool { return k >= rootJSON && k <= rootPath }

// fieldPath is a parsed path such as request.json.payee.iban,
// invoice.lines[0].amount or invoice.allowed_currencies[*].
type fieldPath struct {
	text     string
	root     rootKind
	bindName string // rootBinding: the name written
	bind     int    // rootBinding: the binding's index, -1 if not bound before
	segs     []pseg // after the root
	star     bool   // some segment is [*]
}

type pseg struct {
	key   string
	index int // >= 0: a list index; -1: a key; -2: [*]
}

const (
	segKey  = -1
	segStar = -2
)

// parseFieldPath reads a path against the bindings ru has so far: a
// binding name not yet bound gets bind -1 (the caller reports it).
func parseFieldPath(s string, ru *rule) (fieldPath, error) {
	fp := fieldPath{text: s, bind: -1}
	segs, err := splitPath(s)
	if err != nil {
		return fp, err
	}
	if segs[0].index != segKey {
		return fp, fmt.Errorf("%s: a path starts with request, input or a binding's name", s)
	}
	head := segs[0].key
	rest := segs[1:]
	switch head {
	case "request":
		if len(rest) == 0 || rest[0].index != segKey {
			return fp, fmt.Errorf("%s: say which part of the request: request.json, request.form, request.query or request.path", s)
		}
		switch rest[0].key {
		case "json":
			fp.root = rootJSON
		case "form":
			fp.root = rootForm
		case "query":
			fp.root = rootQuery
		case "path":
			fp.root = rootPath
		default:
			return fp, fmt.Errorf("%s: unknown part of the request %q (json, form, query or path)", s, rest[0].key)
		}
		rest = rest[1:]
		if fp.root != rootJSON && (len(rest) != 1 || rest[0].index != segKey) {
			return fp, fmt.Errorf("%s: request.%s takes exactly one name, e.g. request.%s.amount", s, segs[1].key, segs[1].key)
		}
	case "input":
		fp.root = rootInput
		if len(rest) == 0 {
			return fp, fmt.Errorf("%s: name a value of the input, e.g. input.invoice", s)
		}
	default:
		fp.root = rootBinding
		fp.bindName = head
		for i, b := range ru.binds {
			if b.name == head {
				fp.bind = i
			}
		}
	}
	fp.segs = rest
	for _, sg := range rest {
		if sg.index == segStar {
			fp.star = true
		}
	}
	return fp, nil
}

// splitPath splits "a.b[0].c[*]" into segments. Keys are any characters
// but ".", "[", "]" and spaces.
func splitPath(s string) ([]pseg, error) {
	if s == "" || len(s) > 512 {
		return nil, errors.New("a path is 1 to 512 characters")
	}
	var out []pseg
	i := 0
	expectKey := true
	for i < len(s) {
		switch {
		case s[i] == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 || len(out) == 0 {
				return nil, fmt.Errorf("%s: unbalanced [", s)
			}
			in := s[i+1 : i+j]
			if in == "*" {
				out = append(out, pseg{index: segStar})
			} else {
				n, err := strconv.Atoi(in)
				if err != nil || n < 0 || in != strconv.Itoa(n) {
					return nil, fmt.Errorf("%s: [%s] is not a list index (write [0], [1], ... or [*])", s, in)
				}
				out = append(out, pseg{index: n})
			}
			i += j + 1
			expectKey = false
		case s[i] == '.':
			if expectKey {
				return nil, fmt.Errorf("%s: an empty name", s)
			}
			i++
			expectKey = true
			if i == len(s) {
				return nil, fmt.Errorf("%s: ends with .", s)
			}
		default:
			if !expectKey {
				return nil, fmt.Errorf("%s: a name must follow .", s)
			}
			j := i
			for j < len(s) && !strings.ContainsRune(".[] \t\r\n", rune(s[j])) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("%s: unexpected %q", s, s[i])
			}
			out = append(out, pseg{key: s[i:j], index: segKey})
			i = j
			expectKey = false
		}
	}
	if len(out) == 0 {
		return nil, errors.New("an empty path")
	}
	return out, nil
}

// requestField is the request field a request path names, for
// other_fields: the whole path for request.json, else root and name.
func (fp fieldPath) requestField() string { return fp.text }
