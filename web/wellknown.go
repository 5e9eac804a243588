package web

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Integrity is what the journal-integrity endpoints serve. Every field
// may be nil; its endpoints then answer 404.
//
//	GET  /.well-known/did.json     did:web document: the audit key as #audit-key
//	                               (JsonWebKey2020, OKP Ed25519), previous keys
//	                               as #audit-key-<key id>
//	GET  /checkpoint               the latest signed checkpoint (C2SP note);
//	                               with ?fresh=1 a new one is signed first
//	                               when the head log grew since the latest
//	GET  /checkpoint/key           the log's note verifier key
//	GET  /checkpoint/proof?old=N&new=M  consistency proof, one base64 hash a line
//	POST /checkpoint               sign a checkpoint now; replies with it (with
//	                               dashboard users on, POSTs need the CSRF token)
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
// users and so no CSRF check on POST /checkpoint: it belongs on an
// operator's listener, like /metrics.
func IntegrityHandler(in *Integrity) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	registerIntegrity(e, in)
	return e
}

func registerIntegrity(e *echo.Echo, in *Integrity) {
	if in == nil {
		return
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
	text := func(c echo.Context, code int, s string) error {
		return c.Blob(code, "text/plain; charset=utf-8", []byte(s))
	}
	e.GET("/checkpoint", func(c echo.Context) error {
		if c.QueryParam("fresh") != "" {
			_, err := cs.Refresh(c.Request().Context())
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
		b, err := cs.Checkpoint(c.Request().Context())
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
