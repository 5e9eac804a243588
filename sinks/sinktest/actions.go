package sinktest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
)

// CheckActions proves that what sink describes of its actions
// (broker.ActionDescriber) is what its Describe decodes: each action's
// schema can be made and every property has a description; its examples
// together use every property the schema lists, validate against the
// schema and are accepted by Describe (an error other than BAD_REQUEST, a
// sink that cannot work on this host, is accepted too); and each example
// with one more, unknown property is refused by both. Actions whose input
// schema someone else defined (Action.InputSchema) are skipped. run is the
// run Describe is called for.
func CheckActions(t *testing.T, sink broker.Sink, run *broker.Run) {
	t.Helper()
	d, ok := sink.(broker.ActionDescriber)
	if !ok {
		t.Fatalf("sink %s describes no actions (broker.ActionDescriber)", sink.Name())
	}
	acts := d.Actions()
	if len(acts) == 0 {
		t.Fatalf("sink %s describes no actions", sink.Name())
	}
	for _, a := range acts {
		if a.InputSchema != nil {
			continue
		}
		name := string(sink.Name()) + "." + a.Name
		if a.Sink != sink.Name() || a.Title == "" || len(a.Description) < 40 {
			t.Errorf("%s: sink %q, title %q, description %q: each needs the sink's name, a title and a description a model can use",
				name, a.Sink, a.Title, a.Description)
		}
		s, err := a.Schema()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Errorf("%s: schema does not resolve: %v", name, err)
			continue
		}
		used := map[string]bool{}
		if len(a.Examples) == 0 {
			t.Errorf("%s: no examples", name)
		}
		for _, ex := range a.Examples {
			var obj map[string]any
			if err := json.Unmarshal(ex, &obj); err != nil {
				t.Errorf("%s: example %s is not a JSON object: %v", name, ex, err)
				continue
			}
			for k := range obj {
				used[k] = true
			}
			if err := rs.Validate(obj); err != nil {
				t.Errorf("%s: example %s does not validate against the schema: %v", name, ex, err)
			}
			if err := describe(sink, run, a.Name, ex); err != nil && errors.Is(err, broker.ErrBadRequest) {
				t.Errorf("%s: example %s, which the schema accepts, is refused by Describe: %v", name, ex, err)
			}
			obj["zz_not_a_param"] = 1
			if rs.Validate(obj) == nil {
				t.Errorf("%s: the schema accepts an unknown property", name)
			}
			extra, _ := json.Marshal(obj)
			if err := describe(sink, run, a.Name, extra); !errors.Is(err, broker.ErrBadRequest) {
				t.Errorf("%s: Describe accepts an unknown property (%v), which the schema does not list", name, err)
			}
		}
		props := slices.Sorted(maps.Keys(s.Properties))
		got := slices.Sorted(maps.Keys(used))
		if !slices.Equal(props, got) {
			t.Errorf("%s: the schema lists %v, the examples use %v: every property needs an example, and no example may use another",
				name, props, got)
		}
	}
	names := make([]string, len(acts))
	for i, a := range acts {
		names[i] = a.Name
	}
	sort.Strings(names)
	if len(slices.Compact(names)) != len(acts) {
		t.Errorf("sink %s describes an action twice: %v", sink.Name(), names)
	}
}

func describe(sink broker.Sink, run *broker.Run, action string, params json.RawMessage) error {
	_, err := sink.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: action, Params: params})
	return err
}
