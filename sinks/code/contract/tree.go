package contract

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Dumper is the Python program that reads a program with CPython's own
// parser (the ast module) and writes its tree as JSON: it reads the source
// from stdin and writes one JSON object to stdout, executing nothing of
// the program. The code sink runs it confined in the sandbox; ReadTree
// reads its output.
//
//go:embed astdump.py
var Dumper string

// TreeVersion is the version of the dumper's output this package reads.
const TreeVersion = 1

// Limits on a tree, so that a hostile one cannot exhaust the reader.
const (
	MaxTreeBytes = 64 << 20
	MaxTreeNodes = 1 << 20
	MaxTreeDepth = 2000 // JSON nesting; Python's own parser stops at far less
)

// ErrTree is wrapped by every error ReadTree returns: the dumper's output
// is not a tree this package can read.
var ErrTree = errors.New("contract: unreadable parser tree")

// Tree is the parser's output for one program.
type Tree struct {
	Python string          // the interpreter's version, "3.11.7"
	Stdlib map[string]bool // the interpreter's standard library modules (sys.stdlib_module_names)
	Module *Node           // nil when the program did not parse
	Err    *ParseError     // why it did not
}

// ParseError is the parser's own refusal of a program: a syntax error, or
// nesting too deep for it.
type ParseError struct {
	Kind string // syntax, too-deep
	Msg  string
	Line int
	Col  int
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s at line %d, column %d: %s", e.Kind, e.Line, e.Col, e.Msg)
}

// Node is one node of the program's tree: its ast class name, where it
// starts, and its fields by their ast names (expression contexts left
// out). A field holds a *Node, a []any of fields, a string, an int64, a
// *Const or nil.
type Node struct {
	Type      string
	Line, Col int
	fields    map[string]any
}

// Const is the value of an ast.Constant.
type Const struct {
	Kind string // str, int, float, complex, bytes, bool, none, ellipsis, unknown
	Text string // str: the text; int, float, complex: the literal; bytes: hex; bool: "true"/"false"
	Bad  bool   // a str that is not valid Unicode (lone surrogates)
}

// Node returns the field name as a node, nil when absent or not a node.
func (n *Node) Node(name string) *Node {
	if n == nil {
		return nil
	}
	c, _ := n.fields[name].(*Node)
	return c
}

// Nodes returns the field name as a list of nodes; an entry that is not a
// node is nil.
func (n *Node) Nodes(name string) []*Node {
	if n == nil {
		return nil
	}
	l, _ := n.fields[name].([]any)
	out := make([]*Node, len(l))
	for i, v := range l {
		out[i], _ = v.(*Node)
	}
	return out
}

// Str returns the field name as a string, "" when absent or not one.
func (n *Node) Str(name string) string {
	if n == nil {
		return ""
	}
	s, _ := n.fields[name].(string)
	return s
}

// Has reports whether the field is present and not null.
func (n *Node) Has(name string) bool {
	if n == nil {
		return false
	}
	return n.fields[name] != nil
}

// Int returns the field name as an integer, 0 when absent or not one.
func (n *Node) Int(name string) int64 {
	if n == nil {
		return 0
	}
	i, _ := n.fields[name].(int64)
	return i
}

// Strs returns the field name as a list of strings (Global's names).
func (n *Node) Strs(name string) []string {
	if n == nil {
		return nil
	}
	l, _ := n.fields[name].([]any)
	out := make([]string, 0, len(l))
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Const returns the value of a Constant node, nil for any other.
func (n *Node) Const() *Const {
	if n == nil || n.Type != "Constant" {
		return nil
	}
	c, _ := n.fields["value"].(*Const)
	return c
}

// ReadTree reads the dumper's output. It never panics; anything but a
// well-formed tree of version TreeVersion within the limits is an error
// wrapping ErrTree. A program the parser refused is a Tree with Err set,
// not an error.
func ReadTree(b []byte) (*Tree, error) {
	if len(b) > MaxTreeBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTree, len(b), MaxTreeBytes)
	}
	r := &treeReader{dec: json.NewDecoder(bytes.NewReader(b))}
	r.dec.UseNumber()
	top, err := r.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := r.dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the tree", ErrTree)
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the output is not a JSON object", ErrTree)
	}
	if v, ok := obj["v"].(int64); !ok || v != TreeVersion {
		return nil, fmt.Errorf("%w: not a tree of version %d", ErrTree, TreeVersion)
	}
	t := &Tree{Stdlib: map[string]bool{}}
	t.Python, _ = obj["python"].(string)
	if l, ok := obj["stdlib"].([]any); ok {
		for _, m := range l {
			if s, ok := m.(string); ok {
				t.Stdlib[s] = true
			}
		}
	}
	if e, ok := obj["error"].(map[string]any); ok {
		pe := &ParseError{}
		pe.Kind, _ = e["kind"].(string)
		pe.Msg, _ = e["msg"].(string)
		l, _ := e["line"].(int64)
		c, _ := e["col"].(int64)
		pe.Line, pe.Col = clampInt(l), clampInt(c)
		if pe.Kind == "" {
			pe.Kind = "syntax"
		}
		t.Err = pe
		return t, nil
	}
	m, ok := obj["module"].(*Node)
	if !ok || m.Type != "Module" {
		return nil, fmt.Errorf("%w: no Module node", ErrTree)
	}
	t.Module = m
	return t, nil
}

func clampInt(i int64) int {
	if i < 0 || i > 1<<30 {
		return 0
	}
	return int(i)
}

type treeReader struct {
	dec   *json.Decoder
	nodes int
}

// value reads one JSON value: an object with "_" becomes a *Node, one
// with "t" (a constant's value) a *Const, any other object a
// map[string]any; arrays []any; numbers int64 (a number that is not an
// integer is an error: the dumper writes none); strings and null as they
// are.
func (r *treeReader) value(depth int) (any, error) {
	if depth > MaxTreeDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrTree, MaxTreeDepth)
	}
	tok, err := r.dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTree, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			var l []any
			for r.dec.More() {
				v, err := r.value(depth + 1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := r.dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrTree, err)
			}
			if l == nil {
				l = []any{}
			}
			return l, nil
		case '{':
			obj := map[string]any{}
			for r.dec.More() {
				kt, err := r.dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrTree, err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("%w: an object key that is not a string", ErrTree)
				}
				if _, dup := obj[k]; dup {
					return nil, fmt.Errorf("%w: key %q twice in one object", ErrTree, k)
				}
				v, err := r.value(depth + 1)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := r.dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrTree, err)
			}
			return r.object(obj)
		}
		return nil, fmt.Errorf("%w: unexpected %v", ErrTree, t)
	case json.Number:
		i, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: number %s is not an integer", ErrTree, t)
		}
		return i, nil
	case string, nil:
		return t, nil
	case bool:
		return t, nil
	}
	return nil, fmt.Errorf("%w: unexpected token %v", ErrTree, tok)
}

func (r *treeReader) object(obj map[string]any) (any, error) {
	if typ, ok := obj["_"]; ok {
		name, ok := typ.(string)
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: a node whose type is not a name", ErrTree)
		}
		r.nodes++
		if r.nodes > MaxTreeNodes {
			return nil, fmt.Errorf("%w: more than %d nodes", ErrTree, MaxTreeNodes)
		}
		n := &Node{Type: name, fields: obj}
		delete(obj, "_")
		if pos, ok := obj["@"].([]any); ok {
			if len(pos) != 2 {
				return nil, fmt.Errorf("%w: a position that is not [line, col]", ErrTree)
			}
			l, _ := pos[0].(int64)
			c, _ := pos[1].(int64)
			n.Line, n.Col = clampInt(l), clampInt(c)
			delete(obj, "@")
		}
		if name == "Constant" {
			if _, ok := obj["value"].(*Const); !ok {
				return nil, fmt.Errorf("%w: a Constant without a value", ErrTree)
			}
		}
		return n, nil
	}
	if kind, ok := obj["t"]; ok {
		k, ok := kind.(string)
		if !ok {
			return nil, fmt.Errorf("%w: a constant whose kind is not a name", ErrTree)
		}
		c := &Const{Kind: k}
		switch v := obj["v"].(type) {
		case string:
			c.Text = v
		case bool:
			c.Text = strconv.FormatBool(v)
		case nil:
		default:
			return nil, fmt.Errorf("%w: a constant of kind %s with a value of type %T", ErrTree, k, v)
		}
		c.Bad, _ = obj["bad"].(bool)
		return c, nil
	}
	return obj, nil
}
