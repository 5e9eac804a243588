package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// sessionKey names one upstream session: a server and the person it acts
// for (the empty principal for the catalogue-time listing). A session, and
// a stdio server's process, is never shared between people, so neither a
// credential nor anything a server keeps in memory crosses from one
// person to another.
type sessionKey struct {
	server string
	who    policy.Principal
}

// session is one live connection to an upstream server.
type session struct {
	cs      *sdk.ClientSession
	stop    func() // ends the connection (and the process, for stdio)
	mu      sync.Mutex
	listed  []PinnedTool // the tools this session listed, latest first
	err     error        // why its listing could not be used
	used    time.Time
	changes relister // runs relist on list-changed notifications
}

// relistGap is the least time between two relistings a server's
// list-changed notifications set off.
const relistGap = time.Second

// relister runs a session's relisting when its server says its tool list
// changed: one at a time, and the notifications that come while one runs
// make one more after it (not one each), at least gap after it. A server
// may send as many notifications as it likes; this bounds what they cost
// (each relisting may rewrite the listing kept for review), and keeps a
// listing read earlier from being observed after one read later.
type relister struct {
	mu      sync.Mutex
	running bool
	again   bool
	gap     time.Duration
}

// changed runs run now, or, when a run is under way, once more after it.
func (r *relister) changed(run func()) {
	r.mu.Lock()
	if r.running {
		r.again = true
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	for {
		run()
		r.mu.Lock()
		if !r.again {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.again = false
		r.mu.Unlock()
		time.Sleep(r.gap)
	}
}

func (s *session) tools() ([]PinnedTool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listed, s.err
}

// maxListPages bounds the pages of one listing.
const maxListPages = 64

// relist reads the session's tool list again (at start, and when the
// server says it changed).
func (s *session) relist(ctx context.Context) ([]PinnedTool, error) {
	var all []*sdk.Tool
	params := &sdk.ListToolsParams{}
	for page := 0; ; page++ {
		// A server that pages on forever (empty pages, a cursor that
		// never ends) is refused, not followed.
		if page == maxListPages {
			err := fmt.Errorf("%w: more than %d pages", ErrToolList, maxListPages)
			s.setListed(nil, err)
			return nil, err
		}
		res, err := s.cs.ListTools(ctx, params)
		if err != nil {
			s.setListed(nil, err)
			return nil, err
		}
		all = append(all, res.Tools...)
		if len(all) > MaxTools || res.NextCursor == "" {
			break
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	pinned, err := PinTools(all)
	s.setListed(pinned, err)
	return pinned, err
}

func (s *session) setListed(t []PinnedTool, err error) {
	s.mu.Lock()
	s.listed, s.err = t, err
	s.mu.Unlock()
}

// connect opens a session to srv for who, with cred (zero for none).
func (k *Sink) connect(ctx context.Context, srv *Server, cred provider.Credential) (*session, error) {
	s := &session{used: k.now(), changes: relister{gap: relistGap}}
	client := sdk.NewClient(&sdk.Implementation{Name: "gatehouse", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *sdk.ToolListChangedRequest) {
			s.changes.changed(func() {
				ctx, cancel := context.WithTimeout(ctx, srv.callTimeout())
				defer cancel()
				if listed, err := s.relist(ctx); err == nil {
					k.observe(srv.Name, listed)
				}
			})
		},
	})
	var tr sdk.Transport
	if srv.Stdio() {
		t, stop, err := k.startStdio(srv, cred)
		if err != nil {
			return nil, err
		}
		tr, s.stop = t, stop
	} else {
		// No redirects: a redirected request would carry the credential
		// (added by the transport at each hop) to wherever the server
		// points, and the catalogue names the one address Gatehouse talks
		// to. A 3xx fails the call.
		hc := &http.Client{Transport: credentialTransport{srv: srv, cred: cred, next: k.http},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		tr = &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, MaxRetries: -1, MaxEventSize: maxLineBytes}
		s.stop = func() {}
	}
	cctx, cancel := context.WithTimeout(ctx, srv.callTimeout())
	defer cancel()
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("connect to MCP server %s: %w", srv.Name, err)
	}
	s.cs = cs
	stop := s.stop
	s.stop = func() { _ = cs.Close(); stop() }
	if _, err := s.relist(cctx); err != nil {
		s.stop()
		return nil, fmt.Errorf("list the tools of MCP server %s: %w", srv.Name, err)
	}
	return s, nil
}

// credentialTransport adds a person's credential to every request to an
// HTTP server, and nothing else; only to requests for the catalogued
// server's own origin (scheme, host and port), never to another address
// the server names.
type credentialTransport struct {
	srv  *Server
	cred provider.Credential
	next http.RoundTripper
}

func (t credentialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.cred.Token.IsZero() && t.srv.Auth.Type != AuthNone && sameOrigin(t.srv.URL, r.URL) {
		r = r.Clone(r.Context())
		switch t.srv.Auth.Type {
		case AuthBearer:
			r.Header.Set("Authorization", "Bearer "+t.cred.Token.Reveal())
		case AuthHeader:
			r.Header.Set(t.srv.Auth.Header, t.cred.Token.Reveal())
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The SDK reads a JSON answer whole, without a bound: a server
		// answering gigabytes would exhaust serve's memory. An event
		// stream is bounded per event (MaxEventSize).
		resp.Body = &limitedBody{rc: resp.Body, left: maxLineBytes}
	}
	return resp, err
}

// errTooLarge: an upstream answer larger than maxLineBytes.
var errTooLarge = fmt.Errorf("the server's answer is larger than %d bytes", maxLineBytes)

// limitedBody fails a read past left bytes.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 && err == io.EOF {
			return 0, io.EOF // exactly at the limit
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// sameOrigin says whether u is on the catalogued endpoint's origin.
func sameOrigin(endpoint string, u *url.URL) bool {
	e, err := url.Parse(endpoint)
	return err == nil && u != nil && strings.EqualFold(e.Scheme, u.Scheme) && strings.EqualFold(e.Host, u.Host)
}

// startStdio starts srv's command in the sandbox, its standard streams
// piped to the session, in a workspace of its own holding srv.Files. The
// process ends with the session, at its lifetime, or at a limit.
func (k *Sink) startStdio(srv *Server, cred provider.Credential) (sdk.Transport, func(), error) {
	if k.sb == nil {
		return nil, nil, fmt.Errorf("%w: no sandbox to start MCP server %s in", ErrUnavailable, srv.Name)
	}
	ws, err := k.workspace(srv)
	if err != nil {
		return nil, nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(ws)
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(ws)
		return nil, nil, err
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}
	keys := make([]string, 0, len(srv.Env))
	for key := range srv.Env {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		env = append(env, key+"="+srv.Env[key])
	}
	if srv.Auth.Type == AuthEnv && !cred.Token.IsZero() {
		env = append(env, srv.Auth.Env+"="+cred.Token.Reveal())
	}
	lim := srv.Limits
	spec := sandbox.Spec{
		Argv: srv.Command, Env: env, Workspace: ws, StdinStream: inR, StdoutStream: outW,
		Limits: sandbox.Limits{
			Wall:      time.Duration(orInt(lim.LifetimeSeconds, 3600)) * time.Second,
			CPU:       time.Duration(orInt(lim.CPUSeconds, 600)) * time.Second,
			Memory:    orInt64(lim.MemoryMB, DefaultMemoryMB) << 20,
			Processes: orInt(lim.Processes, 128),
			OpenFiles: 1024,
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer close(done)
		res, err := k.sb.Run(ctx, spec)
		// The process is gone: its end of the pipes closes, so the
		// session reads EOF and every call in flight fails.
		inR.Close()
		outW.Close()
		os.RemoveAll(ws)
		switch {
		case err != nil:
			k.log.Warn("mcp server process could not run", "server", srv.Name, "err", err)
		case res.Killed != "" && res.Killed != sandbox.KilledCanceled:
			k.log.Warn("mcp server process killed at a limit", "server", srv.Name, "limit", res.Killed, "stderr", stderrTail(res.Stderr, cred))
		case res.Killed == "" && (res.ExitCode != 0 || res.Signal != ""):
			// It failed by itself: without its last words on stderr an
			// operator sees only the EOF its session read.
			k.log.Warn("mcp server process ended", "server", srv.Name, "exit", res.ExitCode, "signal", res.Signal, "stderr", stderrTail(res.Stderr, cred))
		}
	}()
	stop := func() {
		cancel()
		inW.Close()
		<-done
		outR.Close()
	}
	return &sdk.IOTransport{Reader: outR, Writer: inW, MaxLineLength: maxLineBytes}, stop, nil
}

// workspace makes a fresh folder the sandbox uid can reach, holding srv's
// files, executable.
func (k *Sink) workspace(srv *Server) (string, error) {
	root := filepath.Join(os.TempDir(), "gatehouse-mcp")
	if err := os.MkdirAll(root, 0o711); err != nil {
		return "", err
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return "", err
	}
	ws, err := os.MkdirTemp(root, srv.Name+"-")
	if err != nil {
		return "", err
	}
	for name, host := range srv.Files {
		data, err := os.ReadFile(host)
		if err == nil {
			dst := filepath.Join(ws, name)
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.WriteFile(dst, data, 0o755)
			}
		}
		if err != nil {
			os.RemoveAll(ws)
			return "", fmt.Errorf("MCP server %s: file %s: %w", srv.Name, name, err)
		}
	}
	return ws, nil
}

// stderrTail is the end of a server's standard error for a log line: at
// most 2 KiB, valid UTF-8, and never the person's credential (a server may
// print its environment).
func stderrTail(b []byte, cred provider.Credential) string {
	const max = 2 << 10
	s := redactText(string(b), cred)
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return strings.ToValidUTF8(strings.TrimSpace(s), "?")
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func orInt64(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// ErrUnavailable: the upstream server cannot be reached or started.
var ErrUnavailable = errors.New("mcp server unavailable")

// sessionFor returns the live session of key, connecting one when there is
// none (cred is looked up by the caller, after the decision).
func (k *Sink) sessionFor(ctx context.Context, key sessionKey, srv *Server, cred provider.Credential) (*session, error) {
	k.mu.Lock()
	s, ok := k.sessions[key]
	k.mu.Unlock()
	if ok {
		s.mu.Lock()
		s.used = k.now()
		s.mu.Unlock()
		return s, nil
	}
	s, err := k.connect(ctx, srv, cred)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	k.mu.Lock()
	if old, ok := k.sessions[key]; ok { // another call connected first
		k.mu.Unlock()
		s.stop()
		return old, nil
	}
	k.sessions[key] = s
	k.mu.Unlock()
	if listed, err := s.tools(); err == nil {
		k.observe(srv.Name, listed)
	}
	return s, nil
}

// drop ends key's session (after it failed), so the next call connects
// again.
func (k *Sink) drop(key sessionKey, s *session) {
	k.mu.Lock()
	if k.sessions[key] == s {
		delete(k.sessions, key)
	}
	k.mu.Unlock()
	s.stop()
}

// janitor ends sessions idle for longer than the idle time.
func (k *Sink) janitor(ctx context.Context) {
	t := time.NewTicker(k.idle / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := k.now()
		k.mu.Lock()
		var idle []*session
		for key, s := range k.sessions {
			s.mu.Lock()
			if now.Sub(s.used) > k.idle {
				idle = append(idle, s)
				delete(k.sessions, key)
			}
			s.mu.Unlock()
		}
		k.mu.Unlock()
		for _, s := range idle {
			s.stop()
		}
	}
}
