package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// ErrBadAction: the action cannot be bound (its params are not a JSON
// object, or cannot be canonicalised).
var ErrBadAction = errors.New("approval: action cannot be bound")

// Action is the exact action an approval is bound to: the sink, the action,
// the run and every param the agent sent (for a browser action, the
// element selector and the values it types or sends).
type Action struct {
	Sink   string          `json:"sink"`
	Action string          `json:"action"`
	Run    string          `json:"run"`
	Params json.RawMessage `json:"params"`
	// Resolved is the digest of what the sink resolved beyond the params
	// (broker.Proposal.Resolved: a stored integration's source), "" for
	// none; it is left out of the canonical form when empty, so actions
	// without one keep their digest.
	Resolved string `json:"resolved,omitempty"`
}

// Digest returns "sha256:<hex>" over the RFC 8785 canonical JSON of a, and
// the arguments as a person is shown them (top-level params, sorted by
// name, each value as canonical JSON). Two actions have the same digest
// exactly when sink, action, run, what was resolved and every param are
// equal as JSON values:
// key order, whitespace and number spelling do not matter; any other
// difference does. Missing params are the empty object.
//
// Params with two keys of one object that are equal after case folding
// and NFC ("body" and "BODY", "key" and the Kelvin sign's "Key") cannot
// be bound, at any depth (ErrBadAction): encoding/json, which decodes a
// sink's params, matches either to the same field and keeps the one
// written last, so such params run differently with their keys in
// another order while their digest, key order aside, stays the same. A
// person approving them could neither tell which value runs nor keep the
// agent from swapping them afterwards. (Keys repeated exactly are refused
// by the canonicalisation.) Nor can params holding a number a 64-bit
// float does not keep exactly (ExactNumbers): RFC 8785 writes numbers as
// doubles, so 12345678901234567000 and 12345678901234567890 would share a
// digest while a sink reading big integers exactly runs either.
func (a Action) Digest() (string, []Argument, error) {
	params := a.Params
	if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
		params = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(params, &obj); err != nil {
		return "", nil, fmt.Errorf("%w: params is not a JSON object: %v", ErrBadAction, err)
	}
	dups, err := strictjson.Scan(params, strictjson.Options{Fold: true})
	if err != nil {
		return "", nil, fmt.Errorf("%w: params: %v", ErrBadAction, err)
	}
	for _, d := range dups {
		if d.Folded {
			return "", nil, fmt.Errorf("%w: %s is written twice, as keys that differ only in case or Unicode form; a sink reads one of them, depending on their order: write each key once",
				ErrBadAction, clip(strictjson.PathText(d.Path, "params")))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var all any
	if err := dec.Decode(&all); err != nil || !ExactNumbers(all) {
		// RFC 8785 writes numbers as doubles: two that differ beyond a
		// double's precision would share one digest, and a sink reading
		// big numbers exactly (a payment reference, an amount in minor
		// units) would run the one nobody approved.
		return "", nil, fmt.Errorf("%w: params hold a number with more digits than a 64-bit float keeps exactly, so an approval could not tell it from a nearby one: send it as a string", ErrBadAction)
	}
	c := a
	c.Params = params
	raw, err := json.Marshal(c)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrBadAction, err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrBadAction, err)
	}
	sum := sha256.Sum256(canon)
	args := make([]Argument, 0, len(obj))
	for k, v := range obj {
		cv, err := jcs.Transform(v)
		if err != nil {
			cv = v
		}
		args = append(args, Argument{Name: k, Value: string(cv)})
	}
	sort.Slice(args, func(i, j int) bool { return args[i].Name < args[j].Name })
	return "sha256:" + hex.EncodeToString(sum[:]), args, nil
}

// ExactNumbers reports whether every number in v (decoded with UseNumber)
// is, as a value, the 64-bit float nearest to it written shortest: what
// RFC 8785 makes of it. 10.50 and 1e2 are; 12345678901234567890 and
// 0.1000000000000000000001 are not.
func ExactNumbers(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil { // out of range
			return false
		}
		want, ok1 := new(big.Rat).SetString(string(x))
		got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return ok1 && ok2 && want.Cmp(got) == 0
	case []any:
		for _, e := range x {
			if !ExactNumbers(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !ExactNumbers(e) {
				return false
			}
		}
	}
	return true
}
