package provider_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// BenchmarkProviderCall compares a GET through Gatehouse with a direct
// http.Client GET to the same local ERP, alternating the two in each
// iteration so both see the same machine state. It reports both p50s and
// the microseconds Gatehouse adds at p50:
//
//   - nats: the whole round trip in strict mode: the agent's NATS request,
//     decode, decide, policy.decision and effect.attempt acknowledged by
//     JetStream, the HTTP call, effect.outcome recorded, the reply.
//   - in-process: what the sink itself adds: Describe, policy.Decide and
//     Perform (credential from the cache, the HTTP call, the reply), with
//     no NATS and no journal.
func BenchmarkProviderCall(b *testing.B) {
	s := start(b, policy.ModeStrict, opts{})
	run := s.open(b, "ada")
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	url := s.erp.srv.URL + "/invoices/INV-7"
	directGET := func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+adaToken)
		res, err := direct.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	params := get("/invoices/INV-7")

	b.Run("nats", func(b *testing.B) {
		var d, g []time.Duration
		for b.Loop() {
			t0 := time.Now()
			directGET()
			d = append(d, time.Since(t0))
			t0 = time.Now()
			r := s.call(b, run, policy.OriginShipped, params)
			g = append(g, time.Since(t0))
			if r.Outcome == nil || r.Outcome.Status != "ok" {
				b.Fatalf("%+v", r)
			}
		}
		report(b, d, g)
	})
	b.Run("in-process", func(b *testing.B) {
		ctx := context.Background()
		pol := s.env.Broker.Policy()
		r := &broker.Run{ID: run, For: policy.Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{}}
		raw, _ := json.Marshal(params)
		req := &broker.EffectRequest{Run: run, Action: "call", Origin: policy.OriginShipped, Params: raw}
		var d, g []time.Duration
		for b.Loop() {
			t0 := time.Now()
			directGET()
			d = append(d, time.Since(t0))
			t0 = time.Now()
			prop, err := s.sink.Describe(ctx, r, req)
			if err != nil {
				b.Fatal(err)
			}
			prop.ID = "e_bench"
			dec := pol.Decide(policy.Input{Mode: policy.ModeStrict, Authority: r.Authority(), Effect: prop.Effect, Now: time.Now()})
			if dec.Verdict != policy.VerdictAllow {
				b.Fatalf("%+v", dec)
			}
			if _, err := s.sink.Perform(ctx, r, req, prop); err != nil {
				b.Fatal(err)
			}
			g = append(g, time.Since(t0))
		}
		report(b, d, g)
	})
}

func report(b *testing.B, direct, gate []time.Duration) {
	if len(direct) == 0 {
		return
	}
	slices.Sort(direct)
	slices.Sort(gate)
	pd, pg := direct[len(direct)/2], gate[len(gate)/2]
	b.ReportMetric(float64(pd.Nanoseconds())/1e3, "direct-p50-us")
	b.ReportMetric(float64(pg.Nanoseconds())/1e3, "gatehouse-p50-us")
	b.ReportMetric(float64((pg-pd).Nanoseconds())/1e3, "added-p50-us")
	b.ReportMetric(float64(gate[len(gate)*99/100].Nanoseconds())/1e3, "gatehouse-p99-us")
}

// memRecords is an in-memory grounding.Records for the check's own cost.
type memRecords map[string][]grounding.Record

func (m memRecords) Lookup(_ context.Context, wf, provider, path string) ([]grounding.Record, error) {
	return m[wf+" "+provider+" "+path], nil
}

func (m memRecords) WrittenAt(context.Context, string, string, string) (time.Time, error) {
	return time.Time{}, nil
}

func (m memRecords) SpentThrough(context.Context, string, string, string) (time.Time, error) {
	return time.Time{}, nil
}

// BenchmarkGroundingCheck is the cost of checking the honest payment
// against the two-record bind chain (invoice, then its supplier), records
// in memory: what grounding adds to Describe besides the store lookups.
func BenchmarkGroundingCheck(b *testing.B) {
	rules, err := grounding.Parse("grounding.yaml", []byte(groundingYAML))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	rec := func(p, body string) grounding.Record {
		sum := sha256.Sum256([]byte(body))
		d := "sha256:" + hex.EncodeToString(sum[:])
		return grounding.Record{Provider: "erp", Path: p, Body: []byte(body), ReadAt: now.Add(-time.Second),
			Citation: grounding.Citation{Run: "r_1", Effect: "e_" + p, Digest: d, Path: "erp:" + p}}
	}
	recs := memRecords{
		"wf erp /invoices/INV-7": {rec("/invoices/INV-7", `{"id":"INV-7","supplier_id":"S-1","amount_due":"1200.00","currency":"EUR","notes":"x"}`)},
		"wf erp /suppliers/S-1":  {rec("/suppliers/S-1", `{"id":"S-1","name":"Acme Supplies","iban":"`+supplierIBAN+`"}`)},
	}
	in := grounding.Input{Workflow: "wf", Now: now, Records: recs,
		Call: grounding.Call{Provider: "erp", Method: "POST", Path: "/payments", Body: []byte(honest), ContentType: "application/json"}}
	ctx := context.Background()
	for b.Loop() {
		if res := rules.Check(ctx, in); !res.Applied || len(res.Failures) != 0 || len(res.Citations) != 2 {
			b.Fatalf("%+v", res)
		}
	}
}
