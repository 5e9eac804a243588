package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/gatehouse/gatehouse/policy"
)

// ActionDescriber is implemented by sinks that describe the actions an
// agent may propose to them: what each does, in words a model and a person
// can use, and the Go type its params decode into. Gatehouse's MCP server
// lists each described action as a tool whose input schema is generated
// from that type (Action.Schema), and the README's params reference is
// generated from the same descriptions.
//
// Actions MUST describe what Describe really decodes: every property the
// schema lists is accepted, every other one refused; sinktest.CheckActions
// proves it against the sink itself, from Examples.
type ActionDescriber interface {
	Actions() []Action
}

// Action describes one action of a sink.
type Action struct {
	Sink policy.Sink
	// Name is the request's action ("deliver").
	Name string
	// Title is a short human name ("Deliver a result").
	Title string
	// Description says what the action does, where it happens, what the
	// reply carries and what the policy decides it on: written for a model
	// choosing a tool and for a person reading the reference.
	Description string
	// Params is a zero value of the params type Describe decodes
	// (output.Params{}); nil for an action that takes no params.
	Params any
	// Fields describes each property of the params object, by its JSON
	// name. Every property the schema lists must have one.
	Fields map[string]string
	// Mutates is false for an action that only reads.
	Mutates bool
	// Class is the effect class the sink decides the action under (read,
	// write, destructive, notify), "" when it depends on the arguments (a
	// provider call's method).
	Class policy.EffectClass
	// System is the mandate system the action is checked against when it
	// does not depend on the arguments: the sink's name, or "" when the
	// arguments choose it (a provider call's provider).
	System string
	// Tool is the name agent cards match (Effect.Tool), "" for
	// "<sink>.<action>".
	Tool string
	// Examples are valid params, together using every property the schema
	// lists.
	Examples []json.RawMessage

	// InputSchema, when set, is the schema of the tool's arguments as
	// someone else defined it (an upstream MCP server's tool, pinned when
	// catalogued); Params and Fields are then unused.
	InputSchema json.RawMessage
	// Bind are params the tool fixes ({"server": "bank", "tool":
	// "transfer"}); the caller's arguments then go in the params member
	// ArgumentsField. Empty: the arguments are the params.
	Bind           json.RawMessage
	ArgumentsField string
	// Unlisted actions are described (for the params reference and
	// sinktest.CheckActions) but not offered as tools: the mcp sink's
	// generic call, offered instead as one tool per upstream tool.
	Unlisted bool
}

// ToolName is the name agent cards match for the action.
func (a *Action) ToolName() string {
	if a.Tool != "" {
		return a.Tool
	}
	return string(a.Sink) + "." + a.Name
}

// ErrActionSchema is returned when an action's params type cannot be
// described as a JSON Schema, or its description is incomplete.
var ErrActionSchema = errors.New("action schema")

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	bytesType      = reflect.TypeFor[[]byte]()
)

// schemaTypes maps the types sinks decode specially: json.RawMessage is
// any JSON value, []byte is base64 text (encoding/json's encoding).
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	rawMessageType: {Description: "any JSON value"},
	bytesType:      {Type: "string", ContentEncoding: "base64"},
}

// Schema returns the JSON Schema (draft 2020-12) of the action's params: an
// object closed to other properties (the sinks decode strictly), each
// property carrying its description from Fields. An action without params
// has an object schema with no properties.
func (a *Action) Schema() (*jsonschema.Schema, error) {
	if a.InputSchema != nil {
		var s jsonschema.Schema
		if err := json.Unmarshal(a.InputSchema, &s); err != nil {
			return nil, fmt.Errorf("%w: %s.%s: %v", ErrActionSchema, a.Sink, a.Name, err)
		}
		return &s, nil
	}
	if a.Params == nil {
		return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{},
			AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}, nil
	}
	t := reflect.TypeOf(a.Params)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s.%s: params type %s is not a struct", ErrActionSchema, a.Sink, a.Name, t)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: schemaTypes})
	if err != nil {
		return nil, fmt.Errorf("%w: %s.%s: %v", ErrActionSchema, a.Sink, a.Name, err)
	}
	var missing []string
	for name, p := range s.Properties {
		d, ok := a.Fields[name]
		if !ok || strings.TrimSpace(d) == "" {
			missing = append(missing, name)
			continue
		}
		if p.Description != "" && p.Description != schemaTypes[rawMessageType].Description {
			d = p.Description + ". " + d
		}
		p.Description = d
	}
	var extra []string
	for name := range a.Fields {
		if _, ok := s.Properties[name]; !ok {
			extra = append(extra, name)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		sort.Strings(missing)
		sort.Strings(extra)
		return nil, fmt.Errorf("%w: %s.%s: properties without a description %v, descriptions of no property %v",
			ErrActionSchema, a.Sink, a.Name, missing, extra)
	}
	s.Title = a.Title
	return s, nil
}

// DescribedActions returns the actions of every sink that describes them,
// sorted by sink and action.
func DescribedActions(sinks []Sink) []Action {
	var out []Action
	for _, s := range sinks {
		if d, ok := s.(ActionDescriber); ok {
			for _, a := range d.Actions() {
				if a.Sink == "" {
					a.Sink = s.Name()
				}
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sink != out[j].Sink {
			return out[i].Sink < out[j].Sink
		}
		return out[i].Name < out[j].Name
	})
	return out
}
