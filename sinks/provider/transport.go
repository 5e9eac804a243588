package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// CallError is a provider call that got no usable answer. Its message
// names the provider and the kind of failure and never carries the URL,
// query, body or credential; ErrorType is what the journal records.
type CallError struct {
	Provider string
	Type     string // connect, reset, timeout, tls, no-credential, response-too-large, record-store, error
	Detail   string // for the agent and the operator; never content
	Err      error
}

func (e *CallError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("provider %s: %s: %s", e.Provider, e.Type, e.Detail)
	}
	return fmt.Sprintf("provider %s: %s", e.Provider, e.Type)
}

// ErrorType names the failure for the journal.
func (e *CallError) ErrorType() string { return e.Type }

func (e *CallError) Unwrap() error { return e.Err }

// newClient returns the one client of provider p: connections are kept
// for keepalive_seconds and reused; redirects are never followed (a
// redirect would send the request, and its credential, somewhere that was
// not decided), and no environment proxy is used.
func newClient(p *Provider) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          p.idle(),
		MaxIdleConnsPerHost:   p.idle(),
		IdleConnTimeout:       time.Duration(p.keepalive()) * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Duration(p.timeout()) * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// response is a provider's answer, read in full.
type response struct {
	status   int
	header   http.Header
	body     []byte
	attempts int
	sentAt   time.Time // when the answered attempt was sent
}

// send carries out c with cred attached, retrying transient failures
// (no response, or 502, 503, 504) when the provider deduplicates by an
// idempotency header; every attempt carries the same key.
func (s *Sink) send(ctx context.Context, c *call, cred *Credential, key string) (*response, error) {
	p := c.prov
	client := s.clients[p.Name]
	target := c.canon.URL()
	tries := 1 + p.retries()
	var lastErr error
	for attempt := 1; ; attempt++ {
		resp, err := s.attempt(ctx, client, c, cred, key, target)
		if err == nil {
			resp.attempts = attempt
			if !retryableStatus(resp.status) || attempt >= tries {
				return resp, nil
			}
		} else {
			lastErr = err
			if ctx.Err() != nil || attempt >= tries || !transient(err) {
				return nil, callError(p.Name, err, attempt)
			}
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			if lastErr == nil {
				lastErr = err
			}
			return nil, callError(p.Name, lastErr, attempt)
		}
	}
}

func (s *Sink) attempt(ctx context.Context, client *http.Client, c *call, cred *Credential, key, target string) (*response, error) {
	p := c.prov
	actx, cancel := context.WithTimeout(ctx, time.Duration(p.timeout())*time.Second)
	defer cancel()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(actx, c.method, target, body)
	if err != nil {
		return nil, err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	if c.body != nil {
		req.Header.Set("Content-Type", c.contentType)
	}
	if p.IdempotencyHeader != "" {
		req.Header.Set(p.IdempotencyHeader, key)
	}
	if cred != nil {
		switch p.Auth.Type {
		case AuthBearer:
			req.Header.Set("Authorization", "Bearer "+cred.Token.Reveal())
		case AuthHeader:
			req.Header.Set(p.Auth.Header, cred.Token.Reveal())
		case AuthBasic:
			req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred.Username+":"+cred.Password.Reveal())))
		}
	}
	sent := s.now()
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	limit := p.maxResponse()
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &CallError{Provider: p.Name, Type: "response-too-large",
			Detail: fmt.Sprintf("status %d with a body over the limit of %d bytes; the call may have taken effect at the provider. Operator: raise max_response_bytes for the provider if larger answers are expected", res.StatusCode, limit)}
	}
	return &response{status: res.StatusCode, header: res.Header, body: b, sentAt: sent}, nil
}

func retryableStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// transient reports whether an attempt that got no answer may be tried
// again: a connection that could not be made or was cut, or an attempt
// that timed out. Only a provider with an idempotency header is retried,
// so the provider drops a repeat of a request it already carried out.
func transient(err error) bool {
	var ce *CallError
	if errors.As(err, &ce) {
		return false
	}
	return true
}

func backoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<(attempt-1), time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// callError turns a failed attempt into a *CallError without the URL,
// which *url.Error would carry with its query.
func callError(provider string, err error, attempts int) error {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	e := &CallError{Provider: provider, Type: "error", Err: err}
	var ne net.Error
	var oe *net.OpError
	var tlsErr *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	switch {
	case errors.Is(err, context.Canceled):
		e.Type = "canceled"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		e.Type = "timeout"
	case errors.As(err, &tlsErr) || errors.As(err, &rec):
		e.Type = "tls"
	case errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &oe) && oe.Op == "dial"):
		e.Type = "connect"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE):
		e.Type = "reset"
	}
	e.Detail = fmt.Sprintf("%v (after %d attempt(s))", err, attempts)
	return e
}
