package broker

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEverySentinelHasACode(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range codes {
		got, advice := CodeOf(errors.Join(errors.New("context"), c.err))
		if got != c.code || advice == "" {
			t.Errorf("%v: code %s advice %q", c.err, got, advice)
		}
		seen[got] = true
	}
	for _, err := range []error{ErrBadRequest, ErrForbiddenField, ErrUnknownRun, ErrRunClosed, ErrUnknownSink,
		ErrJournal, ErrRunStore, ErrEffectFailed, ErrShuttingDown, ErrTooManyInFlight, ErrSinkUnavailable,
		ErrNoReply, ErrNoBroker, ErrRequestInProgress, ErrRequestIDReused, ErrRequestStore} {
		if code, _ := CodeOf(err); code == CodeInternal {
			t.Errorf("%v has no code", err)
		}
	}
	if code, _ := CodeOf(errors.New("surprise")); code != CodeInternal {
		t.Errorf("unknown error code = %s", code)
	}
}

func TestRunIDs(t *testing.T) {
	id := NewRunID(time.Now())
	if !ValidRunID(id) {
		t.Fatalf("NewRunID made %q, which ValidRunID refuses", id)
	}
	if NewRunID(time.Now()) == id {
		t.Fatal("two run ids are equal")
	}
	for _, bad := range []string{"", "r_", "r_../../../../etc/passwd", strings.ToUpper(id), id + "x", "x" + id[1:], "r_0000000000000000000000000/"} {
		if ValidRunID(bad) {
			t.Errorf("ValidRunID(%q) = true", bad)
		}
	}
}

func TestDecodeEffectRequest(t *testing.T) {
	run := NewRunID(time.Now())
	good := `{"run":"` + run + `","action":"deliver","origin":"model","tool":"report.send","params":{"status":"ok"}}`
	r, err := DecodeEffectRequest([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if r.Run != run || r.Action != "deliver" || string(r.Params) != `{"status":"ok"}` {
		t.Fatalf("decoded %+v", r)
	}
	for name, tc := range map[string]struct {
		body string
		want error
	}{
		"empty":          {``, ErrBadRequest},
		"array":          {`[]`, ErrBadRequest},
		"trailing":       {good + `{}`, ErrBadRequest},
		"unknown field":  {`{"run":"` + run + `","action":"a","x":1}`, ErrBadRequest},
		"no action":      {`{"run":"` + run + `"}`, ErrBadRequest},
		"control chars":  {`{"run":"` + run + `","action":"a\u0000b"}`, ErrBadRequest},
		"tenant":         {`{"run":"` + run + `","action":"a","tenant":"globex"}`, ErrForbiddenField},
		"person null":    {`{"run":"` + run + `","action":"a","person":null}`, ErrForbiddenField},
		"acting_for":     {`{"run":"` + run + `","action":"a","acting_for":{"tenant":"x"}}`, ErrForbiddenField},
		"scopes":         {`{"run":"` + run + `","action":"a","scopes":["admin"]}`, ErrForbiddenField},
		"input":          {`{"run":"` + run + `","action":"a","input":{"invoice":"INV-9"}}`, ErrForbiddenField},
		"oversized":      {`{"run":"` + run + `","action":"a","params":"` + strings.Repeat("x", MaxRequestBytes) + `"}`, ErrBadRequest},
		"bad origin":     {`{"run":"` + run + `","action":"a","origin":"god"}`, ErrBadRequest},
		"run traversal":  {`{"run":"r_../x","action":"a"}`, ErrBadRequest},
		"duplicate keys": {`{"run":"` + run + `","action":"a","action":"b"}`, nil},
	} {
		_, err := DecodeEffectRequest([]byte(tc.body))
		if tc.want == nil {
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestDecodeOpenWork(t *testing.T) {
	w, err := DecodeOpenWork([]byte(`{"tenant":"acme","person":"ada","scopes":["a"],"mandate":{"systems":["erp"],"effects":["read"],"expires_at":"2030-01-01T00:00:00Z"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Mandate == nil || w.Mandate.ExpiresAt.Year() != 2030 {
		t.Fatalf("mandate = %+v", w.Mandate)
	}
	for name, body := range map[string]string{
		"no tenant":      `{"person":"ada"}`,
		"slash":          `{"tenant":"acme/evil","person":"ada"}`,
		"bad effect":     `{"tenant":"acme","person":"ada","mandate":{"effects":["everything"]}}`,
		"bad expiry":     `{"tenant":"acme","person":"ada","mandate":{"expires_at":"tomorrow"}}`,
		"unknown field":  `{"tenant":"acme","person":"ada","role":"admin"}`,
		"empty scope":    `{"tenant":"acme","person":"ada","scopes":[""]}`,
		"long person":    `{"tenant":"acme","person":"` + strings.Repeat("p", 129) + `"}`,
		"newline person": `{"tenant":"acme","person":"a\nb"}`,
		"input array":    `{"tenant":"acme","person":"ada","input":[1]}`,
		"input string":   `{"tenant":"acme","person":"ada","input":"x"}`,
	} {
		if _, err := DecodeOpenWork([]byte(body)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

// FuzzDecodeEffectRequest: no input crashes the decoder, and whatever it
// accepts is a request the broker can use safely.
func FuzzDecodeEffectRequest(f *testing.F) {
	f.Add([]byte(`{"run":"r_01jdz7k3m4n5p6q7r8s9t0v1w2","action":"deliver","params":{"status":"ok","result":1}}`))
	f.Add([]byte(`{"run":"r_01jdz7k3m4n5p6q7r8s9t0v1w2","action":"deliver","tenant":"x"}`))
	f.Add([]byte(`{"run":1}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeEffectRequest(data)
		if err != nil {
			if r != nil {
				t.Fatal("request returned with an error")
			}
			return
		}
		if !ValidRunID(r.Run) || r.Action == "" || r.Tenant != nil || r.Person != nil || r.ActingFor != nil || r.Mandate != nil || r.Scopes != nil || r.Agent != nil {
			t.Fatalf("accepted an unusable request: %+v", r)
		}
		if r.Params != nil && !json.Valid(r.Params) {
			t.Fatal("accepted invalid params")
		}
	})
}

func FuzzDecodeOpenWork(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme","person":"ada","scopes":["a"],"mandate":{"systems":["erp"],"effects":["read"],"expires_at":"2030-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"tenant":"a/b","person":"ada"}`))
	f.Add([]byte(`{"tenant":"acme","person":"ada","mandate":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := DecodeOpenWork(data)
		if err != nil {
			return
		}
		if w.Tenant == "" || w.Person == "" || strings.Contains(w.Tenant+w.Person, "/") {
			t.Fatalf("accepted an unusable principal: %+v", w)
		}
	})
}
