package web

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Integrity is what the journal-integrity endpoints serve. Every field
// may be nil; its endpoints then answer 404 (the checkpoint ones with
// NoCheckpoints, saying why).
//
//	GET  /.well-known/did.json     did:web document: the audit key as #audit-key
//	                               (JsonWebKey2020, OKP Ed25519), previous keys
//	                               as #audit-key-<key id>
//	GET  /checkpoint               the latest signed checkpoint (C2SP note);
//	                               with ?fresh=1 a new one is signed first
//	                               when the head log grew since the latest
//	GET  /checkpoint/key           the log's note verifier key
//	GET  /checkpoint/proof?old=N&new=M  consistency proof, one base64 hash a line
//	POST /checkpoint               sign a checkpoint now; replies with it
//
// The two that sign (POST /checkpoint and GET /checkpoint?fresh=1) have
// the journal sign and send the checkpoint to its witnesses. On the web
// server with dashboard users (Config.Users holding at least one user)
// they need the session of an operator or admin bound to no tenant (401
// without a session, 403 for other users) and POSTs the CSRF token; with
// no user yet they are open, as on IntegrityHandler. Everything else is
// public: it is for verifiers.
type Integrity struct {
	AuditKey     ed25519.PublicKey
	PreviousKeys []ed25519.PublicKey
	Checkpoints  CheckpointSource
}

// CheckpointSource is the journal's checkpointer as the web sees it.
type CheckpointSource interface {
	Latest() []byte
	ConsistencyProof(old, n int64) (tlog.TreeProof, error)
	Checkpoint(ctx context.Context) ([]byte, error)
	Refresh(ctx context.Context) ([]byte, error)
	VerifierKey() string
}

var _ CheckpointSource = (*journal.Checkpointer)(nil)

// ErrCheckpointsUnavailable: the CheckpointSource cannot sign or prove
// now (its journal writer is being reopened); the checkpoint endpoints
// answer 503 and the client tries again.
var ErrCheckpointsUnavailable = errors.New("web: checkpoints unavailable for now")

// IntegrityHandler serves the endpoints of in alone, for processes
// without the web server (gatehouse writer --http). It has no dashboard
// users and so no sign-in or CSRF check on POST /checkpoint: it belongs on
// an operator's listener, like /metrics. It signs on demand at most once
// per SignEvery: within that, GET /checkpoint?fresh=1 serves the latest
// checkpoint and POST /checkpoint answers 429 with Retry-After.
func IntegrityHandler(in *Integrity) http.Handler {
	return integrityHandler(in, time.Now)
}

// SignEvery is how often IntegrityHandler signs on demand at most.
const SignEvery = time.Second

func integrityHandler(in *Integrity, now func() time.Time) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	registerIntegrity(e, in, integrityGuard{throttle: &signThrottle{every: SignEvery, now: now}})
	return e
}

// integrityGuard guards the endpoints that sign. Its zero value lets
// every request sign.
type integrityGuard struct {
	// authorize returns nil when the request may have the journal sign,
	// else the error to answer (an *echo.HTTPError); nil authorizes all.
	authorize func(c echo.Context) error
	// throttle spaces on-demand signings; nil does not.
	throttle *signThrottle
}

// signThrottle lets one on-demand signing through per period. Safe for
// concurrent use.
type signThrottle struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	next time.Time // no signing before
	prev time.Time // next before the last take
}

// take reserves the signing slot, or says how long until the next one.
// A nil signThrottle always grants it.
func (t *signThrottle) take() (ok bool, wait time.Duration) {
	if t == nil {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if now.Before(t.next) {
		return false, t.next.Sub(now)
	}
	t.prev, t.next = t.next, now.Add(t.every)
	return true, 0
}

// giveBack returns the slot take granted when nothing was signed with it
// (an empty log, a writer reopening): the next request may try at once.
func (t *signThrottle) giveBack() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next = t.prev
}

// allow is take without the wait.
func (t *signThrottle) allow() bool {
	ok, _ := t.take()
	return ok
}

// maySign authorizes a signing request on the web server: anyone while
// no dashboard user exists (as before users), else only an operator or
// admin bound to no tenant. A users file that cannot be read counts as
// having users.
func (a *app) maySign(c echo.Context) error {
	if empty, err := a.cfg.Users.Empty(); err == nil && empty {
		return nil
	}
	if a.session(c) == nil {
		return echo.NewHTTPError(http.StatusUnauthorized, "sign in first: signing a checkpoint needs an operator of the whole deployment")
	}
	if !a.runsDeployment(c) {
		return echo.NewHTTPError(http.StatusForbidden, "signing a checkpoint is for operators of the whole deployment")
	}
	return nil
}

// NoCheckpoints is what the checkpoint endpoints answer (404) where
// nothing signs checkpoints, so a curl -X POST /checkpoint learns why
// rather than meeting a CSRF refusal meant for the dashboard's forms.
const NoCheckpoints = "this Gatehouse signs no checkpoints: its journal has no signing key; start it with --signing-key-file FILE " +
	"(make one with gatehouse keygen --out FILE --log-origin ORIGIN), or stop it and run gatehouse checkpoint\n"

func registerIntegrity(e *echo.Echo, in *Integrity, guard integrityGuard) {
	text := func(c echo.Context, code int, s string) error {
		return c.Blob(code, "text/plain; charset=utf-8", []byte(s))
	}
	if in == nil || in.Checkpoints == nil {
		off := func(c echo.Context) error { return text(c, http.StatusNotFound, NoCheckpoints) }
		e.GET("/checkpoint", off)
		e.POST("/checkpoint", off)
		e.GET("/checkpoint/key", off)
		e.GET("/checkpoint/proof", off)
	}
	if in == nil {
		return
	}
	authorize := guard.authorize
	if authorize == nil {
		authorize = func(echo.Context) error { return nil }
	}
	if in.AuditKey != nil {
		e.GET("/.well-known/did.json", func(c echo.Context) error {
			return c.JSON(http.StatusOK, didDocument(c.Request().Host, in.AuditKey, in.PreviousKeys))
		})
	}
	cs := in.Checkpoints
	if cs == nil {
		return
	}
	e.GET("/checkpoint", func(c echo.Context) error {
		if c.QueryParam("fresh") != "" {
			if err := authorize(c); err != nil {
				return err
			}
		}
		// Throttled, fresh=1 serves the latest checkpoint as it is.
		if c.QueryParam("fresh") != "" && guard.throttle.allow() {
			_, err := cs.Refresh(c.Request().Context())
			if err != nil {
				guard.throttle.giveBack()
			}
			switch {
			case errors.Is(err, ErrCheckpointsUnavailable):
				return text(c, http.StatusServiceUnavailable, "checkpoints unavailable: the journal writer is reopening; try again\n")
			case err != nil && !errors.Is(err, journal.ErrEmptyLog):
				return text(c, http.StatusInternalServerError, "checkpoint failed\n")
			}
		}
		b := cs.Latest()
		if b == nil {
			return text(c, http.StatusNotFound, "no checkpoint signed yet\n")
		}
		return text(c, http.StatusOK, string(b))
	})
	e.POST("/checkpoint", func(c echo.Context) error {
		if err := authorize(c); err != nil {
			return err
		}
		if ok, wait := guard.throttle.take(); !ok {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
			return text(c, http.StatusTooManyRequests, "a checkpoint was signed on demand less than a second ago: try again, or GET /checkpoint\n")
		}
		b, err := cs.Checkpoint(c.Request().Context())
		if err != nil {
			guard.throttle.giveBack()
		}
		switch {
		case errors.Is(err, journal.ErrEmptyLog):
			return text(c, http.StatusConflict, "the head log is empty: nothing to checkpoint\n")
		case errors.Is(err, ErrCheckpointsUnavailable):
			return text(c, http.StatusServiceUnavailable, "checkpoints unavailable: the journal writer is reopening; try again\n")
		case err != nil:
			return text(c, http.StatusInternalServerError, "checkpoint failed\n")
		}
		return text(c, http.StatusOK, string(b))
	})
	e.GET("/checkpoint/key", func(c echo.Context) error { return text(c, http.StatusOK, cs.VerifierKey()+"\n") })
	e.GET("/checkpoint/proof", func(c echo.Context) error {
		old, err1 := strconv.ParseInt(c.QueryParam("old"), 10, 64)
		n, err2 := strconv.ParseInt(c.QueryParam("new"), 10, 64)
		if err1 != nil || err2 != nil {
			return text(c, http.StatusBadRequest, "old and new must be sizes\n")
		}
		p, err := cs.ConsistencyProof(old, n)
		if errors.Is(err, ErrCheckpointsUnavailable) {
			return text(c, http.StatusServiceUnavailable, "checkpoints unavailable: the journal writer is reopening; try again\n")
		}
		if err != nil {
			return text(c, http.StatusBadRequest, "no such proof: sizes must satisfy 1 <= old <= new <= the log's size\n")
		}
		var b strings.Builder
		for _, h := range p {
			b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
		}
		return text(c, http.StatusOK, b.String())
	})
}

// didDocument is a did:web document naming the audit key.
func didDocument(host string, key ed25519.PublicKey, previous []ed25519.PublicKey) map[string]any {
	did := "did:web:" + strings.ReplaceAll(host, ":", "%3A")
	method := func(id string, k ed25519.PublicKey) map[string]any {
		return map[string]any{
			"id": did + "#" + id, "type": "JsonWebKey2020", "controller": did,
			"publicKeyJwk": map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(k), "kid": journal.KeyID(k)},
		}
	}
	methods := []any{method("audit-key", key)}
	for _, k := range previous {
		methods = append(methods, method("audit-key-"+journal.KeyID(k), k))
	}
	return map[string]any{
		"@context":           []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"},
		"id":                 did,
		"verificationMethod": methods,
		"assertionMethod":    []string{did + "#audit-key"},
	}
}
