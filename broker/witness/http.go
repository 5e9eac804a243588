package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// HTTP interface (C2SP tlog-witness where it defines one):
//
//	POST /add-checkpoint    body: "old N\n", one base64 proof hash per line,
//	                        an empty line, then the signed checkpoint note.
//	                        200: the cosignature lines. 409 with
//	                        Content-Type text/x.tlog.size: the size held.
//	GET  /checkpoint?origin=O  the latest cosigned checkpoint of log O.
//	GET  /key               the witness's verifier key.
//
// OpsHandler adds /healthz, /readyz and /metrics.
const (
	contentTypeSize = "text/x.tlog.size"
	maxRequestBytes = 64 << 10
	maxProofHashes  = 64
)

// statusOf is the one table from errors to HTTP status codes.
func statusOf(err error) int {
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		return http.StatusConflict
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrBadLogSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrFork):
		return http.StatusConflict
	case errors.Is(err, ErrRollback):
		return http.StatusBadRequest
	case errors.Is(err, ErrBadProof):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// ParseAddCheckpoint parses an add-checkpoint request body. It is
// untrusted input: every part is bounded and checked.
func ParseAddCheckpoint(body []byte) (oldSize int64, proof tlog.TreeProof, checkpoint []byte, err error) {
	if len(body) > maxRequestBytes {
		return 0, nil, nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, maxRequestBytes)
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	sz, found := bytes.CutPrefix(line, []byte("old "))
	if !ok || !found {
		return 0, nil, nil, fmt.Errorf("%w: first line must be \"old N\"", ErrMalformed)
	}
	oldSize, err = strconv.ParseInt(string(sz), 10, 64)
	if err != nil || oldSize < 0 || strconv.FormatInt(oldSize, 10) != string(sz) {
		return 0, nil, nil, fmt.Errorf("%w: bad old size", ErrMalformed)
	}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return 0, nil, nil, fmt.Errorf("%w: no empty line before the checkpoint", ErrMalformed)
		}
		if len(line) == 0 {
			break
		}
		if len(proof) == maxProofHashes {
			return 0, nil, nil, fmt.Errorf("%w: proof longer than %d hashes", ErrMalformed, maxProofHashes)
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize {
			return 0, nil, nil, fmt.Errorf("%w: bad proof hash", ErrMalformed)
		}
		proof = append(proof, tlog.Hash(h))
	}
	if len(rest) == 0 {
		return 0, nil, nil, fmt.Errorf("%w: no checkpoint", ErrMalformed)
	}
	return oldSize, proof, rest, nil
}

// FormatAddCheckpoint builds an add-checkpoint request body.
func FormatAddCheckpoint(oldSize int64, proof tlog.TreeProof, checkpoint []byte) []byte {
	b := fmt.Appendf(nil, "old %d\n", oldSize)
	for _, h := range proof {
		b = append(b, base64.StdEncoding.EncodeToString(h[:])...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, checkpoint...)
}

// Handler serves the witness's HTTP interface.
func (w *Witness) Handler() http.Handler { return w.handler(nil) }

// handler is Handler counting into m (nil: not counted).
func (w *Witness) handler(m *metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
		if err != nil {
			http.Error(rw, "cannot read request", http.StatusBadRequest)
			return
		}
		old, proof, cp, err := ParseAddCheckpoint(body)
		var sigs []byte
		if err == nil {
			sigs, err = w.AddCheckpoint(old, proof, cp)
		}
		origin, _, _ := strings.Cut(string(cp), "\n")
		m.observe(origin, err)
		var conflict *ConflictError
		switch {
		case err == nil:
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			rw.Write(sigs)
		case errors.As(err, &conflict):
			rw.Header().Set("Content-Type", contentTypeSize)
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprintf(rw, "%d\n", conflict.Size)
		default:
			http.Error(rw, err.Error(), statusOf(err))
		}
	})
	mux.HandleFunc("GET /checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		b, err := w.Latest(r.URL.Query().Get("origin"))
		switch {
		case err != nil:
			http.Error(rw, err.Error(), statusOf(err))
		case b == nil:
			http.Error(rw, "no checkpoint cosigned for this log yet", http.StatusNotFound)
		default:
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			rw.Write(b)
		}
	})
	mux.HandleFunc("GET /key", func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(rw, w.VerifierKey())
	})
	return mux
}

// Client talks to a witness over HTTP. It implements journal.Cosigner.
type Client struct {
	URL  string // base URL, e.g. http://witness.example:8081
	HTTP *http.Client
}

// ErrRefused: the witness refused the checkpoint (fork, rollback, bad
// proof, unknown log, bad signature); the message is the witness's.
var ErrRefused = errors.New("witness: refused")

func (c *Client) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c *Client) String() string { return c.URL }

// AddCheckpoint submits a checkpoint; see journal.Cosigner.
func (c *Client) AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, checkpoint []byte) ([]byte, error) {
	resp, body, err := c.do(ctx, http.MethodPost, "/add-checkpoint", bytes.NewReader(FormatAddCheckpoint(oldSize, proof, checkpoint)))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return body, nil
	case resp.StatusCode == http.StatusConflict && resp.Header.Get("Content-Type") == contentTypeSize:
		n, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("witness %s: bad conflict reply", c.URL)
		}
		return nil, &journal.SizeConflictError{Size: n}
	}
	return nil, fmt.Errorf("%w (%s): %d: %s", ErrRefused, c.URL, resp.StatusCode, strings.TrimSpace(string(body)))
}

// Latest fetches the latest checkpoint the witness cosigned for origin.
func (c *Client) Latest(ctx context.Context, origin string) ([]byte, error) {
	resp, body, err := c.do(ctx, http.MethodGet, "/checkpoint?origin="+url.QueryEscape(origin), nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("witness %s: %d: %s", c.URL, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// do sends one request to the witness at path and returns its response
// with the body read (bounded) and closed.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRequestBytes))
	if err != nil {
		return nil, nil, err
	}
	return resp, b, nil
}

var _ journal.Cosigner = (*Client)(nil)
