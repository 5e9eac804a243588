package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding"
)

// Writes other sinks send. The provider sink is not the only way an agent
// can change what a provider's records say: a form the browser posts to the
// ERP's web UI, or an MCP server's write tool, changes invoice 7's IBAN as
// surely as a PUT through this sink. The sinks that send such writes note
// them here, before they send, and the note is the one an ungrounded write
// of this sink makes (markWritten): every provider reached whose records
// grounding reads is marked written at grounding.AnyPath, in the workflow
// and for the run's agent (grounding.AgentScope). A record read after the
// note grounds nothing, so a payment cannot be grounded on the agent's own
// change made elsewhere.
//
// Each method returns nil at once when no grounding rules are loaded (there
// is nothing to launder). A note that cannot be stored returns a
// *CallError of type record-store, and the caller MUST NOT send the write
// (fail closed). Safe for concurrent use.

// ErrUnknownProvider: a name given to NoteWriteToProviders is not in the
// catalogue.
var ErrUnknownProvider = errors.New("provider not in the catalogue")

// NoteWriteTo notes, before it is sent, a write another sink sends to
// target (an http, https, ws or wss URL; only its host and port count):
// every catalogue provider on target's server (the comparison of
// Catalogue.SameServer: hosts without a final dot, IP literals in one
// form, every loopback name one host, ports 80 and 443 one port) is marked
// as a whole. A target whose host cannot be read marks every provider
// (NoteWriteAnywhere).
func (s *Sink) NoteWriteTo(ctx context.Context, run *broker.Run, target *url.URL) error {
	server, port, err := serverOf(target)
	if err != nil {
		return s.NoteWriteAnywhere(ctx, run)
	}
	return s.noteWrite(ctx, run, s.cat.onServer(server, port))
}

// NoteWriteToProviders notes a write that can reach the named providers,
// each with every provider of its server (Catalogue.SameServer). A name
// not in the catalogue is an error wrapping ErrUnknownProvider, and
// nothing is noted.
func (s *Sink) NoteWriteToProviders(ctx context.Context, run *broker.Run, names []string) error {
	var reach []string
	for _, n := range names {
		p, ok := s.cat.Provider(n)
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownProvider, n)
		}
		reach = append(reach, s.cat.SameServer(p)...)
	}
	return s.noteWrite(ctx, run, reach)
}

// NoteWriteAnywhere notes a write whose reach is unknown: every provider
// of the catalogue is marked.
func (s *Sink) NoteWriteAnywhere(ctx context.Context, run *broker.Run) error {
	all := make([]string, len(s.cat.Providers))
	for i := range s.cat.Providers {
		all[i] = s.cat.Providers[i].Name
	}
	return s.noteWrite(ctx, run, all)
}

// HasProvider reports whether the catalogue has a provider named name.
func (s *Sink) HasProvider(name string) bool {
	_, ok := s.cat.Provider(name)
	return ok
}

func (s *Sink) noteWrite(ctx context.Context, run *broker.Run, providers []string) error {
	rules := s.rules.Load()
	if rules == nil {
		return nil
	}
	return s.markAnyPath(ctx, rules, run, "", providers, s.now())
}

// markAnyPath marks each of providers whose records rules read as written
// as a whole (grounding.AnyPath) at at, in run's workflow and for its
// agent. by names the provider the write was sent through, for the error
// ("" names the provider marked).
func (s *Sink) markAnyPath(ctx context.Context, rules *grounding.Rules, run *broker.Run, by string, providers []string, at time.Time) error {
	seen := make(map[string]bool, len(providers))
	for _, q := range providers {
		if seen[q] || !rules.ReadsFrom(q) {
			continue
		}
		seen[q] = true
		who := by
		if who == "" {
			who = q
		}
		for _, scope := range []string{workflow(run), grounding.AgentScope(run.Agent)} {
			if err := s.wrote(ctx, who, scope, q, grounding.AnyPath, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrote stores one write mark; an error is the call's record-store
// failure, reported as provider by's.
func (s *Sink) wrote(ctx context.Context, by, scope, provider, path string, at time.Time) error {
	if err := s.records.Wrote(ctx, scope, provider, path, at); err != nil {
		return &CallError{Provider: by, Type: "record-store", Err: err,
			Detail: "the write could not be noted for grounding, so it was not sent. Operator: make the grounding record store reachable"}
	}
	return nil
}

// serverOf is u's server and port as Catalogue.SameServer compares them;
// ws and wss take the ports of http and https.
func serverOf(u *url.URL) (server string, port int, err error) {
	if u == nil {
		return "", 0, errors.New("no URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		port = 80
	case "https", "wss":
		port = 443
	default:
		return "", 0, fmt.Errorf("scheme %q", u.Scheme)
	}
	if ps := u.Port(); ps != "" {
		if port, err = strconv.Atoi(ps); err != nil || port < 1 || port > 65535 {
			return "", 0, fmt.Errorf("port %q", ps)
		}
	}
	host, err := urlHost(u)
	if err != nil {
		return "", 0, err
	}
	return serverHost(host), port, nil
}
