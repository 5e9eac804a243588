package browser

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// The agent's actions (EffectRequest.Action).
const (
	ActionGoto       = "goto"
	ActionClick      = "click"
	ActionFill       = "fill"
	ActionSelect     = "select"
	ActionPress      = "press"
	ActionText       = "text"
	ActionContent    = "content"
	ActionScreenshot = "screenshot"
	ActionClose      = "close"
	// ActionPages lists the run's pages: the one it started on and every
	// popup opened since, by index.
	ActionPages = "pages"
	// ActionSwitch makes another of the run's pages (by index, from pages
	// or an action's "opened") the one later actions act on.
	ActionSwitch = "switch"
)

// Effect actions that differ from the agent's action names.
const (
	// EffectNavigate is a top-level navigation (the goto action).
	EffectNavigate = "navigate"
	// EffectSend is a request carrying data out of a page; only the pool
	// proposes it.
	EffectSend = "send"
)

// Bounds on params.
const (
	maxURL      = 8 << 10
	maxSelector = 1 << 10
	maxKey      = 64
	maxValue    = 256 << 10
	maxValues   = 256
)

// action is an agent's decoded request, handed from Describe to Perform.
type action struct {
	name     string
	url      string // goto: the absolute http(s) URL
	selector string
	value    string
	values   []string
	key      string
	page     int  // switch: the page's index
	inline   bool // screenshot: the PNG in the reply, not stored
}

// The params of each action, decoded strictly (unknown fields refused).
type (
	gotoParams struct {
		URL string `json:"url"`
	}
	selectorParams struct {
		Selector string `json:"selector"`
	}
	fillParams struct {
		Selector string `json:"selector"`
		Value    string `json:"value"`
	}
	selectParams struct {
		Selector string   `json:"selector"`
		Values   []string `json:"values"`
	}
	pressParams struct {
		Selector string `json:"selector"`
		Key      string `json:"key"`
	}
	switchParams struct {
		Page *int `json:"page"`
	}
	screenshotParams struct {
		Inline bool `json:"inline"`
	}
	noParams struct{}
)

// Describe implements broker.Sink. Agent actions are decoded from params; a
// send is accepted only from the pool itself (see proposeSend).
func (p *Pool) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if st, ok := ctx.Value(storeKey{}).(*stored); ok {
		return p.describeStore(run, req, st)
	}
	if _, ok := ctx.Value(sendKey{}).(*send); ok || req.Action == EffectSend {
		return p.describeSend(ctx, run, req)
	}
	a, err := decodeAction(req)
	if err != nil {
		return nil, err
	}
	if a.name == ActionScreenshot && !a.inline && p.cfg.Artifacts == nil {
		return nil, fmt.Errorf("%w: %w", broker.ErrSinkUnavailable, ErrNoArtifactStore)
	}
	if a.name == ActionGoto && p.boundDecider() != nil && p.lookup(run.ID).needsBrowser() {
		// Starting the browser is no effect; one that cannot start is
		// reported before anything is decided.
		if _, err := p.browser(); errors.Is(err, ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", broker.ErrSinkUnavailable, err)
		}
	}
	sess := p.lookup(run.ID)
	var rules policy.BrowserRules
	if d := p.boundDecider(); d != nil {
		rules = d.Policy().Browser()
	} else {
		rules = (*policy.Policy)(nil).Browser()
	}
	page := pagePlace(&rules, sess.runSite(), hostPath(sess.currentURL()))
	e := policy.Effect{Sink: policy.SinkBrowser, Action: a.name, Origin: req.Origin, Tool: req.Tool,
		Target: page.target(), Host: page.host, PageHost: page.host, Path: page.path}
	if a.name == ActionSwitch {
		// The target is the page switched to.
		if u, ok := sess.pageURL(a.page); ok {
			to := pagePlace(&rules, sess.runSite(), hostPath(u))
			e.Target, e.Host, e.Path = to.target(), to.host, to.path
		}
	}
	if a.name == ActionGoto {
		to := hostPath(a.url)
		e.Action, e.Method, e.Target, e.Host, e.Path = EffectNavigate, "GET", to.target(), to.host, to.path
	}
	raw := req.Params
	if raw == nil {
		raw = json.RawMessage("{}")
	}
	return &broker.Proposal{Effect: e, Size: int64(len(raw)), Digest: digest(raw), State: a}, nil
}

func decodeAction(req *broker.EffectRequest) (*action, error) {
	a := &action{name: req.Action}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", broker.ErrBadRequest, req.Action, fmt.Sprintf(format, args...))
	}
	switch req.Action {
	case ActionGoto:
		var v gotoParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		u, err := url.Parse(v.URL)
		if err != nil || len(v.URL) > maxURL || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, bad("url must be an absolute http or https URL of at most %d bytes", maxURL)
		}
		a.url = u.String()
	case ActionClick, ActionText:
		var v selectorParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		a.selector = v.Selector
	case ActionFill:
		var v fillParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		if len(v.Value) > maxValue {
			return nil, bad("value is longer than %d bytes", maxValue)
		}
		a.selector, a.value = v.Selector, v.Value
	case ActionSelect:
		var v selectParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		if len(v.Values) > maxValues {
			return nil, bad("more than %d values", maxValues)
		}
		a.selector, a.values = v.Selector, v.Values
		if a.values == nil {
			a.values = []string{}
		}
	case ActionPress:
		var v pressParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		if v.Key == "" || len(v.Key) > maxKey {
			return nil, bad("key must be 1 to %d bytes (\"Enter\", \"Control+A\")", maxKey)
		}
		a.selector, a.key = v.Selector, v.Key
	case ActionScreenshot:
		var v screenshotParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		a.inline = v.Inline
		return a, nil
	case ActionContent, ActionClose, ActionPages:
		if err := broker.DecodeParams(req.Params, &noParams{}); err != nil {
			return nil, err
		}
		return a, nil
	case ActionSwitch:
		var v switchParams
		if err := broker.DecodeParams(req.Params, &v); err != nil {
			return nil, err
		}
		if v.Page == nil || *v.Page < 0 || *v.Page >= maxPages {
			return nil, bad("page must be an index from 0 to %d (see the pages action)", maxPages-1)
		}
		a.page = *v.Page
		return a, nil
	default:
		return nil, fmt.Errorf("%w: the browser sink's actions are goto, click, fill, select, press, text, content, screenshot, pages, switch and close, not %q",
			broker.ErrBadRequest, clip(req.Action))
	}
	if req.Action != ActionGoto && (a.selector == "" || len(a.selector) > maxSelector) {
		return nil, bad("selector must be 1 to %d bytes", maxSelector)
	}
	return a, nil
}

// Perform implements broker.Sink.
func (p *Pool) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	switch st := prop.State.(type) {
	case *send:
		return st.perform(prop)
	case *stored:
		return st.perform(ctx, p.cfg.Artifacts)
	case *action:
		return p.perform(ctx, run, req, st)
	}
	return nil, fmt.Errorf("browser: proposal state %T", prop.State)
}

func (p *Pool) perform(ctx context.Context, r *broker.Run, req *broker.EffectRequest, a *action) (*broker.Performed, error) {
	run := r.ID
	if a.name == ActionClose {
		open := p.lookup(run) != nil
		p.CloseRun(run)
		return reply(map[string]any{"closed": open}, nil)
	}
	s, err := p.acquire(run, a.name == ActionGoto)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, ErrNoPage
	}
	defer p.release(s)
	s.owner.Store(r)
	s.act.Lock()
	defer s.act.Unlock()
	var page playwright.Page
	if a.name == ActionGoto {
		page, err = p.open(s)
	} else {
		s.mu.Lock()
		page = s.page
		s.mu.Unlock()
		if page == nil {
			err = ErrNoPage
		}
	}
	if err != nil {
		return nil, err
	}
	if s.crashed() {
		p.CloseRun(run)
		return nil, ErrRestarted
	}
	// What earlier actions set off is on record before this one acts.
	s.settle(p.cfg.SettleQuiet, p.cfg.SettleMax, time.Time{})
	switch a.name {
	case ActionPages:
		return reply(map[string]any{"pages": s.listPages(), "current": s.currentIndex()}, nil)
	case ActionSwitch:
		pg, err := s.switchTo(a.page)
		if err != nil {
			return nil, err
		}
		s.setURL(pg.URL())
		return reply(map[string]any{"page": a.page, "url": pg.URL()}, nil)
	}
	before := s.pageCount()
	defer func() { s.setURL(page.URL()) }()
	if touches(a.name) {
		// What this action sets off is decided and on record before it
		// returns (session.settle).
		defer func() { s.settle(p.cfg.SettleQuiet, p.cfg.SettleMax, time.Now()) }()
	}

	failed := func(err error) error { return fmt.Errorf("%w: %s: %v", ErrAction, a.name, err) }
	switch a.name {
	case ActionGoto:
		// What the old site's pages hold stays behind (leave.go).
		if err := p.leaveSite(s, page, hostPath(a.url).host); err != nil {
			return nil, failed(err)
		}
		s.startGoto(a.url)
		resp, err := page.Goto(a.url)
		s.endGoto(page.URL())
		if err != nil {
			return nil, failed(err)
		}
		status := 0
		if resp != nil {
			status = resp.Status()
		}
		return reply(map[string]any{"url": page.URL(), "status": status},
			map[string]string{"status": strconv.Itoa(status), "host": hostPath(page.URL()).host})
	case ActionClick:
		err = page.Click(a.selector)
	case ActionFill:
		err = page.Fill(a.selector, a.value)
	case ActionSelect:
		_, err = page.SelectOption(a.selector, playwright.SelectOptionValues{Values: &a.values})
	case ActionPress:
		err = page.Press(a.selector, a.key)
	case ActionText:
		text, err := page.InnerText(a.selector)
		if err != nil {
			return nil, failed(err)
		}
		return content(map[string]any{"text": text}, text)
	case ActionContent:
		html, err := page.Content()
		if err != nil {
			return nil, failed(err)
		}
		return content(map[string]any{"html": html}, html)
	case ActionScreenshot:
		png, err := page.Screenshot()
		if err != nil {
			return nil, failed(err)
		}
		if !a.inline {
			return p.storeScreenshot(ctx, r, req, png)
		}
		return content(map[string]any{"png_base64": base64.StdEncoding.EncodeToString(png),
			"size": len(png), "digest": digest(png)}, string(png))
	}
	if err != nil {
		return nil, failed(err)
	}
	out := map[string]any{"url": page.URL()}
	if opened := s.pagesSince(before); len(opened) > 0 {
		out["opened"] = opened
	}
	return reply(out, nil)
}

// touches reports whether an action can set the page sending: the ones
// that end with the settle barrier.
func touches(action string) bool {
	switch action {
	case ActionGoto, ActionClick, ActionFill, ActionSelect, ActionPress:
		return true
	}
	return false
}

// reply is a result without content of its own.
func reply(v any, detail map[string]string) (*broker.Performed, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &broker.Performed{Result: journal.Result{Status: "ok", Detail: detail}, Reply: b}, nil
}

// content is a result carrying what the page holds; the journal gets its
// size and digest only.
func content(v any, data string) (*broker.Performed, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxReplyBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(b), MaxReplyBytes)
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: int64(len(data)), Digest: digest([]byte(data))},
		Reply:  b,
	}, nil
}

// place is a URL's host and path as effects name them.
type place struct{ host, path string }

// hostPath returns rawURL's host (lower case, without the scheme's default
// port) and path; zero for "" or a URL without a host (about:blank).
func hostPath(rawURL string) place {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return place{}
	}
	host := strings.ToLower(u.Host)
	switch {
	case u.Scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	case u.Scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return place{host: host, path: path}
}

// target is host+path ("api.example.com/v1/x"), "" for no host.
func (pl place) target() string {
	if pl.host == "" {
		return ""
	}
	return pl.host + pl.path
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
