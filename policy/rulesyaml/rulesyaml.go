// Package rulesyaml reads the YAML (or JSON) tree of a rules file strictly,
// for the policy and grounding loaders: one document, no aliases or merge
// keys, plain and unique keys, and errors that name the line and the place
// in the file. What a node means is the loader's business; this package
// only refuses what no rules file may contain.
package rulesyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrEmpty is returned by Root for a file with no document, or a single
// null one.
var ErrEmpty = errors.New("empty rules file")

// Reader reads nodes of one file. Every error goes through Fail, which
// names the file.
type Reader struct {
	Fail func(format string, args ...any) error
}

// Root decodes data to its root node. A name ending in ".json" must be
// valid JSON (json's own message, with its position, is reported); any
// other file is YAML. More than one document is an error; no document or a
// null one is ErrEmpty (not wrapped by Fail, so the loader words it).
func (r Reader) Root(name string, data []byte) (*yaml.Node, error) {
	if strings.EqualFold(filepath.Ext(name), ".json") && len(bytes.TrimSpace(data)) > 0 && !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("not valid JSON")
		}
		return nil, r.Fail("%v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrEmpty
		}
		return nil, r.Fail("%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, r.Fail("%v", err)
		}
		return nil, r.Fail("line %d: more than one YAML document; a rules file holds one", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, ErrEmpty
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, ErrEmpty
	}
	return root, nil
}

// At is an error about node n, at where (the place in the file).
func (r Reader) At(n *yaml.Node, where, format string, args ...any) error {
	return r.Fail("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...))
}

// Pair is one key and its value in a mapping.
type Pair struct {
	Key   string
	Value *yaml.Node
}

// Mapping returns the pairs of a mapping node, refusing aliases, merge
// keys, keys that are not plain names, repeated keys and, when known is
// given, keys not in it.
func (r Reader) Mapping(n *yaml.Node, where string, known ...string) ([]Pair, error) {
	if n.Kind == yaml.AliasNode {
		return nil, r.At(n, where, "YAML aliases are not supported in a rules file")
	}
	if n.Kind != yaml.MappingNode {
		return nil, r.At(n, where, "want a mapping (key: value), got %s", KindName(n))
	}
	pairs := make([]Pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			return nil, r.At(k, where, "YAML merge keys are not supported in a rules file")
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, r.At(k, where, "keys must be plain names")
		}
		if v.Kind == yaml.AliasNode {
			return nil, r.At(v, where, "YAML aliases are not supported in a rules file")
		}
		for _, p := range pairs {
			if p.Key == k.Value {
				return nil, r.At(k, where, "key %q appears twice", k.Value)
			}
		}
		if known != nil && !slices.Contains(known, k.Value) {
			return nil, r.At(k, where, "unknown key %q (the keys here are %s)", k.Value, strings.Join(known, ", "))
		}
		pairs = append(pairs, Pair{k.Value, v})
	}
	return pairs, nil
}

// Sequence returns the items of a list node, refusing aliases among them.
func (r Reader) Sequence(n *yaml.Node, where string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, r.At(n, where, "want a list, got %s", KindName(n))
	}
	for _, e := range n.Content {
		if e.Kind == yaml.AliasNode {
			return nil, r.At(e, where, "YAML aliases are not supported in a rules file")
		}
	}
	return n.Content, nil
}

// Scalar returns the text of a non-null scalar.
func (r Reader) Scalar(n *yaml.Node, where string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", r.At(n, where, "want a single value, got %s", KindName(n))
	}
	return n.Value, nil
}

// List reads one scalar (a one-element list) or a non-empty list of them,
// each read with scalar (Reader.Scalar, or a stricter one of the loader's).
func (r Reader) List(n *yaml.Node, where string, scalar func(*yaml.Node, string) (string, error), seq func(*yaml.Node, string) ([]*yaml.Node, error)) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := scalar(n, where)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	items, err := seq(n, where)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, r.At(n, where, "an empty list matches nothing; remove the key or give a value")
	}
	out := make([]string, 0, len(items))
	for _, e := range items {
		s, err := scalar(e, where)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// KindName says what a node is, for error messages.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected YAML node"
}
