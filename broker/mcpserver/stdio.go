package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessageBytes bounds one message on stdio when
// StdioTransport.MaxMessageBytes is not set: the arguments Gatehouse takes
// (broker.MaxRequestBytes) several times over.
const DefaultMaxMessageBytes = 4 << 20

// Codes of the JSON-RPC errors StdioTransport answers with.
const (
	codeParseError     = jsonrpc.CodeParseError     // the line is not JSON
	codeInvalidRequest = jsonrpc.CodeInvalidRequest // JSON, but not a JSON-RPC message MCP allows here
)

// StdioTransport is MCP on standard input and output, as `gatehouse mcp`
// serves it: the SDK's newline-delimited JSON-RPC (mcp.IOTransport) behind
// a guard that keeps one bad message from ending the session. The SDK
// alone ends the session (and so the process) on the first line that is
// not JSON, not JSON-RPC 2.0, longer than its limit, an empty batch or a
// batch in a protocol version without batches; clients see the server
// vanish. Here each such line is answered with a JSON-RPC error (-32700
// for a line that is not JSON, -32600 for the rest, with the request's id
// when it has one, else null) and the session goes on:
//
//   - a line longer than MaxMessageBytes is skipped to its newline;
//   - a batch is refused, one error per request it holds, once the
//     negotiated version has no batches (2025-06-18 and later); in the
//     versions that have them, its invalid members are answered one by one
//     and the rest go on as a batch;
//   - a request whose id is still in flight is refused (the ids of one
//     session must not repeat).
//
// It also sends no response to a request the client cancelled
// (notifications/cancelled) while it was in flight, as the specification
// asks of receivers: the SDK writes one anyway, which clients report as a
// response to an unknown request. Responses to requests that came in a
// batch are always sent (the batch's response needs them).
//
// Blank lines are ignored. Out receives only JSON-RPC messages, one a line.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// MaxMessageBytes bounds one line (default DefaultMaxMessageBytes).
	MaxMessageBytes int
	Logger          *slog.Logger
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	max := t.MaxMessageBytes
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &stdioState{
		out: &lockedWriter{w: t.Out}, log: log,
		inflight: map[jsonrpc.ID]bool{}, batched: map[jsonrpc.ID]bool{}, cancelled: map[jsonrpc.ID]bool{},
	}
	g := &guard{st: st, br: bufio.NewReaderSize(t.In, 64<<10), max: max}
	// The guard hands the SDK whole lines of at most max bytes.
	inner, err := (&mcp.IOTransport{Reader: g, Writer: st.out, MaxLineLength: max + 1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &stdioConn{Connection: inner, st: st}, nil
}

// stdioState is what the guard and the connection share.
type stdioState struct {
	out *lockedWriter
	log *slog.Logger

	mu        sync.Mutex
	version   string // the negotiated protocol version, "" before initialize
	initID    jsonrpc.ID
	inflight  map[jsonrpc.ID]bool // requests read and not yet answered
	batched   map[jsonrpc.ID]bool // those of them that came in a batch
	cancelled map[jsonrpc.ID]bool // those of them the client cancelled
}

// batches says whether the negotiated version has JSON-RPC batches (2025-03-26
// and before; before initialize the SDK takes them, so this does too).
func (st *stdioState) batches() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.version == "" || st.version < "2025-06-18"
}

// refuse writes a JSON-RPC error response; id is the request's id as it
// was written (a string or a number), or nil for null.
func (st *stdioState) refuse(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	if err != nil {
		return
	}
	st.log.Warn("mcp: a message was refused", "code", code, "error", msg)
	if _, err := st.out.Write(append(b, '\n')); err != nil {
		st.log.Debug("mcp: the refusal could not be written", "err", err)
	}
}

// lockedWriter makes each Write whole on the shared output: the SDK writes
// a message and its newline in one call, and so does refuse.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// guard reads the input line by line and passes on only what the SDK can
// take; see StdioTransport.
type guard struct {
	st      *stdioState
	br      *bufio.Reader
	max     int
	pending []byte
	err     error
}

func (g *guard) Close() error { return nil }

func (g *guard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, tooLong, id, err := g.line()
		g.err = err
		switch {
		case tooLong:
			g.st.refuse(id, codeInvalidRequest, fmt.Sprintf("a message of more than %d bytes; the limit is %d", g.max, g.max))
		case len(line) > 0:
			if pass := g.check(line); pass != nil {
				g.pending = append(pass, '\n')
			}
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// line reads up to the next newline: the line without it (nil when
// blank), or tooLong when it had more than max bytes (then read to its
// end and dropped, with the id of the request it held, when one was
// found, so the client's request fails at once). At the end of the input
// a last line without a newline counts.
func (g *guard) line() (line []byte, tooLong bool, id json.RawMessage, err error) {
	var buf []byte
	var sc idScanner
	for {
		frag, err := g.br.ReadSlice('\n')
		switch {
		case tooLong:
			sc.feed(frag)
		case len(buf)+len(frag) > g.max+1: // +1: the newline
			tooLong = true
			sc.feed(buf)
			sc.feed(frag)
			buf = nil
		default:
			buf = append(buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, true, sc.id, err
		}
		return bytes.TrimSpace(buf), false, nil, err
	}
}

// idScanner finds the top-level "id" of a JSON object streamed through it
// in pieces, in constant memory: the string or number written there, or
// nil.
type idScanner struct {
	depth          int
	inStr, esc     bool
	keyPos, valPos bool   // at depth 1: a key comes next; a value comes next
	readingKey     bool   // reading a depth-1 key
	key            []byte // its first bytes
	lastKey        string // the depth-1 key whose value comes
	capture        int    // 0; 1 capturing a string id; 2 a number id
	val            []byte
	id             json.RawMessage
	done           bool
}

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		if s.done {
			return
		}
		s.step(c)
	}
}

func (s *idScanner) step(c byte) {
	switch s.capture {
	case 1:
		s.val = append(s.val, c)
		switch {
		case len(s.val) > 256:
			s.done = true
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.id, s.done = s.val, true
		}
		return
	case 2:
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			if s.val = append(s.val, c); len(s.val) > 40 {
				s.done = true
			}
			return
		}
		if json.Valid(s.val) {
			s.id = s.val
		}
		s.done = true
		return
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.readingKey {
				s.readingKey, s.lastKey = false, string(s.key)
			}
			return
		}
		if s.readingKey && len(s.key) < 3 {
			s.key = append(s.key, c)
		}
		return
	}
	if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
		return
	}
	if s.depth == 1 && s.valPos {
		s.valPos = false
		if s.lastKey == "id" {
			switch {
			case c == '"':
				s.capture, s.val = 1, []byte{c}
				return
			case c == '-' || c >= '0' && c <= '9':
				s.capture, s.val = 2, []byte{c}
				return
			}
		}
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.keyPos {
			s.keyPos, s.readingKey, s.key = false, true, s.key[:0]
		}
	case '{', '[':
		if s.depth == 0 && c == '[' {
			s.done = true // a batch: no one id
			return
		}
		s.depth++
		s.keyPos = s.depth == 1
	case '}', ']':
		s.depth--
		if s.depth <= 0 {
			s.done = true
		}
	case ':':
		s.valPos = s.depth == 1
	case ',':
		s.keyPos = s.depth == 1
	}
}

// check returns what to pass on for one line (nil: nothing), answering
// what it refuses.
func (g *guard) check(line []byte) []byte {
	if !json.Valid(line) {
		g.st.refuse(nil, codeParseError, "parse error: the message is not JSON")
		return nil
	}
	if line[0] != '[' {
		if g.member(line, false) {
			return line
		}
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
		g.st.refuse(nil, codeInvalidRequest, "an empty JSON-RPC batch")
		return nil
	}
	if !g.st.batches() {
		g.st.mu.Lock()
		v := g.st.version
		g.st.mu.Unlock()
		msg := fmt.Sprintf("JSON-RPC batches are not part of MCP %s; send each message on its own line", v)
		answered := false
		for _, raw := range raws {
			if id := idOf(raw); id != nil {
				g.st.refuse(id, codeInvalidRequest, msg)
				answered = true
			}
		}
		if !answered {
			g.st.refuse(nil, codeInvalidRequest, msg)
		}
		return nil
	}
	kept := make([]json.RawMessage, 0, len(raws))
	for _, raw := range raws {
		if g.member(raw, true) {
			kept = append(kept, raw)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	if len(kept) == 1 {
		return kept[0]
	}
	b, _ := json.Marshal(kept)
	return b
}

// member checks one message, alone or in a batch: a JSON-RPC 2.0 message,
// and a request whose id is not in flight. It records the requests it
// passes.
func (g *guard) member(raw json.RawMessage, inBatch bool) bool {
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		g.st.refuse(idOf(raw), codeInvalidRequest, "invalid request: "+err.Error())
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.ID.IsValid() {
		return true
	}
	st := g.st
	st.mu.Lock()
	dup := st.inflight[req.ID]
	if !dup {
		st.inflight[req.ID] = true
		if inBatch {
			st.batched[req.ID] = true
		}
		if req.Method == "initialize" {
			st.initID = req.ID
		}
	}
	st.mu.Unlock()
	if dup {
		st.refuse(idOf(raw), codeInvalidRequest, fmt.Sprintf("request id %v is still in flight; ids must not repeat within a session", req.ID.Raw()))
	}
	return !dup
}

// idOf is a message's id as written, when it is one JSON-RPC allows (a
// string or a number); nil otherwise.
func idOf(raw json.RawMessage) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	if c := m.ID[0]; c == '"' || c == '-' || c >= '0' && c <= '9' {
		return m.ID
	}
	return nil
}

// stdioConn is the SDK's connection, with the cancellations and the
// negotiated version kept.
type stdioConn struct {
	mcp.Connection
	st *stdioState
}

// Read implements mcp.Connection: it notes which in-flight requests the
// client cancels.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.ID.IsValid() && req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
				c.st.mu.Lock()
				if c.st.inflight[id] && !c.st.batched[id] {
					c.st.cancelled[id] = true
				}
				c.st.mu.Unlock()
			}
		}
	}
	return msg, err
}

// Write implements mcp.Connection: a response to a request the client
// cancelled is not sent; the initialize response gives the version.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		st := c.st
		st.mu.Lock()
		drop := st.cancelled[resp.ID]
		delete(st.inflight, resp.ID)
		delete(st.batched, resp.ID)
		delete(st.cancelled, resp.ID)
		if st.initID.IsValid() && resp.ID == st.initID && resp.Error == nil {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(resp.Result, &r) == nil {
				st.version = r.ProtocolVersion
			}
		}
		st.mu.Unlock()
		if drop {
			st.log.Info("mcp: no response sent for a request the client cancelled", "id", resp.ID.Raw())
			return nil
		}
	}
	return c.Connection.Write(ctx, msg)
}
