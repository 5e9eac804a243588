package browser

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// WriteNoter is told, before the proxy sends it, of every request that can
// change state on a server: a method other than GET, HEAD and OPTIONS, a
// WebSocket, and any tunnel the proxy pipes without reading its requests.
// The provider sink implements it (provider.Sink.NoteWriteTo), so a record
// read through the provider sink after the agent changed it in a site's
// web UI grounds nothing. An error means the write must not be sent.
type WriteNoter interface {
	NoteWriteTo(ctx context.Context, run *broker.Run, target *url.URL) error
}

// errNoRun: a request of a session whose run the pool never learned; its
// write cannot be noted.
var errNoRun = errors.New("the session's run is not known")

// noteTimeout bounds noting one write.
const noteTimeout = 10 * time.Second

// NoteWrites makes the proxy tell n of every write before sending it
// (WriteNoter). Call it once, before the first action; nil notes nothing.
func (p *Pool) NoteWrites(n WriteNoter) { p.noter.Store(&n) }

// changesState reports whether r can change state on the server it goes
// to: any method but GET, HEAD and OPTIONS, or an upgrade (a WebSocket).
// A GET that changes state is the site's bug, and is not noted.
func changesState(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return r.Header.Get("Upgrade") != ""
	}
	return true
}

// noteWrite tells the pool's WriteNoter that the run of px is about to
// send a write to target; nil when no noter is set or px is the runtime's
// (which sends nothing). A session whose run is unknown fails closed.
func (px *proxy) noteWrite(ctx context.Context, target *url.URL) error {
	n := px.pool.noter.Load()
	if n == nil || *n == nil || px.s == nil {
		return nil
	}
	run := px.s.owner.Load()
	if run == nil {
		return errNoRun
	}
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	return (*n).NoteWriteTo(ctx, run, target)
}

// noteTunnel notes a tunnel to authority (host:port), over TLS when tls.
func (px *proxy) noteTunnel(authority string, tls bool) error {
	u := &url.URL{Scheme: "http", Host: authority}
	if tls {
		u.Scheme = "https"
	}
	return px.noteWrite(px.pool.base, u)
}

// writeRefused logs a write the proxy refused because it could not be
// noted.
func (px *proxy) writeRefused(host string, err error) {
	px.pool.log.Warn("send refused: the write could not be noted for grounding", "run", px.s.run, "host", host, "err", err)
}
