package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// PinnedTool is one upstream tool as an operator accepted it.
type PinnedTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// Digest is "sha256:<hex>" over the RFC 8785 canonical JSON of the
	// other members.
	Digest string `json:"digest"`
}

// Pin is a server's accepted tool list.
type Pin struct {
	Server   string       `json:"server"`
	Accepted time.Time    `json:"accepted"`
	By       string       `json:"by"` // "first listing" or the operator's note
	Tools    []PinnedTool `json:"tools"`
}

// Tool returns the pinned tool named name.
func (p *Pin) Tool(name string) (*PinnedTool, bool) {
	if p == nil {
		return nil, false
	}
	for i := range p.Tools {
		if p.Tools[i].Name == name {
			return &p.Tools[i], true
		}
	}
	return nil, false
}

// ErrToolList: an upstream tool list that cannot be pinned (a name twice,
// a schema that is not JSON, too many tools).
var ErrToolList = errors.New("upstream tool list")

// MaxTools bounds an upstream tool list.
const MaxTools = 512

// PinTools turns a listed tool list into pinnable tools, sorted by name.
// It refuses, with ErrToolList, an unusable list: more than MaxTools, an
// empty or repeated name, a name longer than 128 bytes or with a '/', a
// name with white space, a control or invisible character or not NFC, two
// names equal but for case or Unicode form ("delete_note", "Delete_Note":
// a blocked_tools rule naming one would not hold for the other), an input
// schema that is not a JSON object.
func PinTools(tools []*sdk.Tool) ([]PinnedTool, error) {
	if len(tools) > MaxTools {
		return nil, fmt.Errorf("%w: %d tools, at most %d", ErrToolList, len(tools), MaxTools)
	}
	out := make([]PinnedTool, 0, len(tools))
	seen := map[string]bool{}
	folded := map[string]string{}
	for _, t := range tools {
		if t == nil || t.Name == "" || len(t.Name) > 128 || seen[t.Name] || slices.Contains([]byte(t.Name), '/') {
			return nil, fmt.Errorf("%w: a tool has an empty, repeated, too long or '/'-holding name", ErrToolList)
		}
		if why := badToolName(t.Name); why != "" {
			return nil, fmt.Errorf("%w: tool %q: the name %s", ErrToolList, t.Name, why)
		}
		f := strictjson.FoldKey(t.Name)
		if other, ok := folded[f]; ok {
			return nil, fmt.Errorf("%w: tools %q and %q differ only in case or Unicode form, so rules naming one would not hold for the other", ErrToolList, other, t.Name)
		}
		seen[t.Name], folded[f] = true, t.Name
		pt := PinnedTool{Name: t.Name, Title: t.Title, Description: t.Description}
		var err error
		if pt.InputSchema, err = rawJSON(t.InputSchema); err != nil || len(pt.InputSchema) == 0 || pt.InputSchema[0] != '{' {
			return nil, fmt.Errorf("%w: tool %q: the input schema is not a JSON object", ErrToolList, t.Name)
		}
		if t.OutputSchema != nil {
			if pt.OutputSchema, err = rawJSON(t.OutputSchema); err != nil {
				return nil, fmt.Errorf("%w: tool %q: output schema: %v", ErrToolList, t.Name, err)
			}
		}
		if t.Annotations != nil {
			if pt.Annotations, err = rawJSON(t.Annotations); err != nil {
				return nil, fmt.Errorf("%w: tool %q: annotations: %v", ErrToolList, t.Name, err)
			}
		}
		if pt.Digest, err = pt.digest(); err != nil {
			return nil, fmt.Errorf("%w: tool %q: %v", ErrToolList, t.Name, err)
		}
		out = append(out, pt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// badToolName says what makes name unusable, "" when nothing: a name
// rules and people read one way only holds no white space, control or
// invisible format character (a zero-width space makes "delete_note\u200b"
// look like delete_note and escape rules naming it), and is NFC.
func badToolName(name string) string {
	if !utf8.ValidString(name) {
		return "is not UTF-8"
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || !unicode.IsGraphic(r) {
			return fmt.Sprintf("holds U+%04X (white space, a control or an invisible character)", r)
		}
	}
	if !norm.NFC.IsNormalString(name) {
		return "is not in Unicode normal form C"
	}
	return ""
}

func rawJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

func (t *PinnedTool) digest() (string, error) {
	c := *t
	c.Digest = ""
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Change is how one listed tool differs from its pin.
type Change struct {
	Tool string `json:"tool"`
	// Kind is "changed" (description, schemas, title or annotations),
	// "new" (not pinned) or "removed" (pinned, no longer listed).
	Kind   string      `json:"kind"`
	Fields []string    `json:"fields,omitempty"` // which members changed
	Pinned *PinnedTool `json:"pinned,omitempty"`
	Listed *PinnedTool `json:"listed,omitempty"`
}

// Diff compares a listed tool list with a pin, by tool name.
func Diff(pin *Pin, listed []PinnedTool) []Change {
	var out []Change
	for i := range listed {
		l := &listed[i]
		p, ok := pin.Tool(l.Name)
		switch {
		case !ok:
			out = append(out, Change{Tool: l.Name, Kind: "new", Listed: l})
		case p.Digest != l.Digest:
			out = append(out, Change{Tool: l.Name, Kind: "changed", Fields: changedFields(p, l), Pinned: p, Listed: l})
		}
	}
	if pin != nil {
		for i := range pin.Tools {
			p := &pin.Tools[i]
			if !slices.ContainsFunc(listed, func(l PinnedTool) bool { return l.Name == p.Name }) {
				out = append(out, Change{Tool: p.Name, Kind: "removed", Pinned: p})
			}
		}
	}
	return out
}

func changedFields(a, b *PinnedTool) []string {
	var f []string
	if a.Title != b.Title {
		f = append(f, "title")
	}
	if a.Description != b.Description {
		f = append(f, "description")
	}
	if !sameJSON(a.InputSchema, b.InputSchema) {
		f = append(f, "input_schema")
	}
	if !sameJSON(a.OutputSchema, b.OutputSchema) {
		f = append(f, "output_schema")
	}
	if !sameJSON(a.Annotations, b.Annotations) {
		f = append(f, "annotations")
	}
	return f
}

// sameJSON compares two JSON values in canonical form (a pin file is
// indented, a listing compact).
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, errA := jcs.Transform(a)
	cb, errB := jcs.Transform(b)
	return errA == nil && errB == nil && string(ca) == string(cb)
}

// Pins keeps each server's pin and its latest listing as files in Dir:
// <server>.json (the pin) and <server>.listed.json (the latest listing that
// differed from it, for an operator to review). Safe for concurrent use
// within a process; the files are written atomically (rename), so a CLI
// accepting a listing while serve runs is read on serve's next check
// (each check stats the pin file).
type Pins struct {
	Dir string

	mu    sync.Mutex
	cache map[string]cachedPin
}

type cachedPin struct {
	mod time.Time
	pin *Pin
}

// NewPins returns the store in dir, made 0700 if missing.
func NewPins(dir string) (*Pins, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Pins{Dir: dir, cache: map[string]cachedPin{}}, nil
}

func (p *Pins) path(server string) string       { return filepath.Join(p.Dir, server+".json") }
func (p *Pins) listedPath(server string) string { return filepath.Join(p.Dir, server+".listed.json") }

// Load returns server's pin, nil when it has none.
func (p *Pins) Load(server string) (*Pin, error) {
	fi, err := os.Stat(p.path(server))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	c, ok := p.cache[server]
	p.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime()) {
		return c.pin, nil
	}
	var pin Pin
	if err := readJSON(p.path(server), &pin); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.cache[server] = cachedPin{mod: fi.ModTime(), pin: &pin}
	p.mu.Unlock()
	return &pin, nil
}

// Save makes tools server's pin.
func (p *Pins) Save(server, by string, tools []PinnedTool, now time.Time) (*Pin, error) {
	pin := &Pin{Server: server, Accepted: now.UTC(), By: by, Tools: tools}
	if err := writeJSON(p.path(server), pin); err != nil {
		return nil, err
	}
	_ = os.Remove(p.listedPath(server))
	return pin, nil
}

// Listed is the latest listing of a server that differed from its pin.
type Listed struct {
	Server string       `json:"server"`
	Listed time.Time    `json:"listed"`
	Tools  []PinnedTool `json:"tools"`
}

// SaveListed keeps a listing that differs from the pin, for review.
func (p *Pins) SaveListed(server string, tools []PinnedTool, now time.Time) error {
	return writeJSON(p.listedPath(server), Listed{Server: server, Listed: now.UTC(), Tools: tools})
}

// LoadListed returns the listing kept for review, nil when none.
func (p *Pins) LoadListed(server string) (*Listed, error) {
	var l Listed
	err := readJSON(p.listedPath(server), &l)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return &l, err
}

// Accept makes the listing kept for review the pin: all of it, or with
// only set, only those tools (the others keep their pin, or stay
// unpinned).
func (p *Pins) Accept(server, by string, only []string, now time.Time) (*Pin, []Change, error) {
	l, err := p.LoadListed(server)
	if err != nil {
		return nil, nil, err
	}
	if l == nil {
		return nil, nil, fmt.Errorf("%s: no listing differs from the pin; nothing to accept", server)
	}
	old, err := p.Load(server)
	if err != nil {
		return nil, nil, err
	}
	changes := Diff(old, l.Tools)
	tools := l.Tools
	if len(only) > 0 {
		keep := map[string]PinnedTool{}
		if old != nil {
			for _, t := range old.Tools {
				keep[t.Name] = t
			}
		}
		var accepted []Change
		for _, c := range changes {
			if !slices.Contains(only, c.Tool) {
				continue
			}
			accepted = append(accepted, c)
			if c.Listed != nil {
				keep[c.Tool] = *c.Listed
			} else {
				delete(keep, c.Tool)
			}
		}
		tools = tools[:0:0]
		for _, t := range keep {
			tools = append(tools, t)
		}
		sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
		changes = accepted
	}
	pin, err := p.Save(server, by, tools, now)
	if err != nil {
		return nil, nil, err
	}
	if len(only) > 0 && len(Diff(pin, l.Tools)) > 0 {
		_ = p.SaveListed(server, l.Tools, l.Listed)
	}
	return pin, changes, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
