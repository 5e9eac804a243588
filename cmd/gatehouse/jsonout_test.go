package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

type inner struct {
	Lag     uint64 `json:"lag"`
	Pending uint64 `json:"pending"`
}

type tagged struct {
	inner
	Name    string            `json:"name"`
	Skip    string            `json:"-"`
	Empty   string            `json:"empty,omitempty"`
	Zero    time.Time         `json:"zero,omitzero"`
	When    time.Time         `json:"when"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Bytes   []byte            `json:"bytes"`
	Map     map[string]int    `json:"map"`
	Nil     *inner            `json:"nil"`
	List    []string          `json:"list"`
	NilList []string          `json:"nil_list"`
	Any     any               `json:"any"`
	Labels  map[string]string `json:"labels,omitempty"`
	Count   int               `json:"count,string"`
}

// A type whose fields are all tagged encodes exactly as encoding/json
// encodes it.
func TestJSONMatchesEncodingJSONOnTaggedTypes(t *testing.T) {
	v := tagged{inner: inner{Lag: 3, Pending: 1}, Name: "a<b>", Skip: "x", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Raw: json.RawMessage(`{"k": 1}`), Bytes: []byte("hi"), Map: map[string]int{"b": 2, "a": 1}, List: []string{"x"},
		Any: map[string]any{"Z": 1}, Count: 7}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := writeJSON(&got, v); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want)+"\n" {
		t.Fatalf("got  %s\nwant %s", got.String(), want)
	}
}

type untagged struct {
	ID           string
	ActionDigest string
	HTTPStatus   int
	Requested    time.Time
	Nested       struct{ OldestAge float64 }
	Data         map[string]string // keys are data: kept as they are
}

// Fields without a tag are snake_case; map keys are left alone.
func TestJSONSnakeCasesUntaggedFields(t *testing.T) {
	v := untagged{ID: "ap_1", ActionDigest: "sha256:x", HTTPStatus: 200, Data: map[string]string{"NO_BROKER": "1"}}
	var got bytes.Buffer
	if err := writeJSON(&got, &v); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"ap_1","action_digest":"sha256:x","http_status":200,"requested":"0001-01-01T00:00:00Z","nested":{"oldest_age":0},"data":{"NO_BROKER":"1"}}` + "\n"
	if got.String() != want {
		t.Fatalf("got  %s\nwant %s", got.String(), want)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"ID": "id", "ActionDigest": "action_digest", "HTTPStatus": "http_status",
		"NATSURL": "natsurl", "P50us": "p50us", "Run": "run", "RunSeq": "run_seq", "OldestAgeSeconds": "oldest_age_seconds", "MaxLineBytes": "max_line_bytes"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
