package browser

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
)

// chromiumImage are the headers Chromium 156 sends for an <img> of another
// site through the proxy.
func chromiumImage() http.Header {
	return http.Header{
		"Accept":             {"image/jxl,image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"},
		"Accept-Encoding":    {"gzip, deflate, br, zstd"},
		"Accept-Language":    {"en-US,en;q=0.9"},
		"Proxy-Connection":   {"keep-alive"},
		"Referer":            {"http://127.0.0.1:8000/"},
		"Sec-Fetch-Dest":     {"image"},
		"Sec-Fetch-Mode":     {"no-cors"},
		"Sec-Fetch-Site":     {"same-site"},
		"Sec-Ch-Ua":          {`"Chromium";v="156"`},
		"User-Agent":         {"Mozilla/5.0 HeadlessChrome/156.0.0.0"},
		"If-None-Match":      {`"abc"`},
		"Sec-Ch-Ua-Platform": {`"Linux"`},
	}
}

func TestSubdomain(t *testing.T) {
	for _, c := range []struct{ host, sub, reg string }{
		{"fonts.gstatic.com", "fonts", "gstatic.com"},
		{"a.b.example.co.uk", "a.b", "example.co.uk"},
		{"example.com", "", "example.com"},
		{"secret-data.attacker.example", "secret-data", "attacker.example"},
		{"x.y.localhost", "x.y", "localhost"},
		{"localhost", "", "localhost"},
		{"127.0.0.1", "", "127.0.0.1"},
		{"[::1]", "", "::1"},
		{"pub-0123456789abcdef0123456789abcdef.r2.dev", "", "pub-0123456789abcdef0123456789abcdef.r2.dev"},
	} {
		if sub, reg := subdomain(c.host); sub != c.sub || reg != c.reg {
			t.Errorf("subdomain(%q) = %q, %q; want %q, %q", c.host, sub, reg, c.sub, c.reg)
		}
	}
	if got := redactedHost("secret.localhost:8080"); got != "*.localhost:8080" {
		t.Errorf("redactedHost = %q", got)
	}
}

func TestPageHeaders(t *testing.T) {
	const lang = "en-US,en;q=0.9"
	with := func(k, v string) http.Header { h := chromiumImage(); h.Set(k, v); return h }
	for _, c := range []struct {
		name        string
		h           http.Header
		preflighted []string
		data        bool
	}{
		{"chromium's own", chromiumImage(), nil, false},
		{"a custom header", with("X-Data", "secret"), nil, true},
		{"authorization", with("Authorization", "Bearer secret"), nil, true},
		{"an api's accept", with("Accept", "application/json"), nil, false},
		{"data in accept", with("Accept", "secret-data-secret-data"), nil, true},
		{"data in an accept parameter", with("Accept", "text/html;x=secret"), nil, true},
		{"another language", with("Accept-Language", "secret"), nil, true},
		{"a page's content type", with("Content-Type", "text/plain;charset=secret"), nil, true},
		{"range from the start", with("Range", "bytes=0-"), nil, false},
		{"a page's range", with("Range", "bytes=123456-"), nil, true},
		{"a preflighted cache header", with("If-None-Match", "secret"), []string{"if-none-match"}, true},
	} {
		var parts []string
		n := pageHeaders(c.h, lang, c.preflighted, &parts)
		if (n > 0) != c.data || len(parts) > 0 != c.data {
			t.Errorf("%s: %d bytes %q", c.name, n, parts)
		}
	}
}

func TestClassifyReads(t *testing.T) {
	p := New(Config{})
	t.Cleanup(func() { _ = p.Close() })
	s := &session{run: "r", lang: "en-US,en;q=0.9"}
	pol := policy.Default()
	h := chromiumImage()
	h.Set("Referer", "https://shop.example/") // made by the run's page
	read := func(url string) *send {
		return p.classify(pol, s, request{method: "GET", url: url, header: h}, "shop.example")
	}
	for _, c := range []struct {
		url     string
		decided bool
		host    string
		path    string
	}{
		{"https://cdn.example/lib/3.7.1/lib.min.js", false, "", ""},
		{"https://shop.example/search?q=shoes", false, "", ""}, // the run's own site
		{"https://cdn.example/img.png?d=x", true, "cdn.example", "/img.png"},
		{"https://cdn.example/" + strings.Repeat("s", 200), true, "cdn.example", redactedPath},
		{"https://" + strings.Repeat("s", 30) + ".attacker.example/x.png", true, "*.attacker.example", "/x.png"},
	} {
		snd := read(c.url)
		if (snd != nil) != c.decided {
			t.Errorf("%s: decided = %v", c.url, snd != nil)
			continue
		}
		if snd != nil && (snd.to.host != c.host || snd.to.path != c.path || snd.size == 0 || !strings.HasPrefix(snd.digest, "sha256:")) {
			t.Errorf("%s: %+v", c.url, snd)
		}
	}
	if snd := p.classify(pol, s, request{method: "POST", url: "https://shop.example/x", hasBody: true}, "shop.example"); snd == nil || snd.action != EffectSend {
		t.Errorf("a POST is a send: %+v", snd)
	}
	// The run's site read by a document of another origin (a frame of
	// another site, a page of the run's last site still unloading) with
	// data: to another site, from that document.
	foreign := chromiumImage() // Referer http://127.0.0.1:8000/
	if snd := p.classify(pol, s, request{method: "GET", url: "https://shop.example/search?q=x", header: foreign}, "shop.example"); snd == nil || snd.pageHost != "127.0.0.1:8000" {
		t.Errorf("a read of the run's site with data by another origin's document: %+v", snd)
	}
	if snd := p.classify(pol, s, request{method: "GET", url: "https://shop.example/lib.js", header: foreign}, "shop.example"); snd != nil {
		t.Errorf("a plain read of the run's site by another origin's document was decided: %+v", snd)
	}
	if snd := p.classify(pol, s, request{method: "SeCrEt", url: "https://cdn.example/x", hasBody: true}, "shop.example"); snd == nil || snd.method != ExtensionMethod {
		t.Errorf("an extension method is recorded by name: %+v", snd)
	}
}

// FuzzClassify feeds untrusted addresses and headers (a page chooses both)
// to classify: it never panics, a read carrying data has a size and digest,
// and no query, and no long path or name, reaches the effect's host and
// path.
func FuzzClassify(f *testing.F) {
	f.Add("GET", "http://evil.example/a?b=c", "X-Data", "v")
	f.Add("GET", "http://"+strings.Repeat("k", 40)+".evil.localhost:1/x", "Accept", "image/*")
	f.Add("HEAD", "https://evil.example/"+strings.Repeat("p", 300), "Range", "bytes=0-")
	f.Add("OPTIONS", "http://[::1]:80/", "Accept-Language", "de")
	p := New(Config{})
	f.Cleanup(func() { _ = p.Close() })
	pol := policy.Default()
	f.Fuzz(func(t *testing.T, method, rawURL, name, value string) {
		s := &session{run: "r", lang: "en"}
		h := http.Header{}
		if name != "" {
			h[http.CanonicalHeaderKey(name)] = []string{value}
		}
		snd := p.classify(pol, s, request{method: method, url: rawURL, header: h}, "shop.example")
		if snd == nil {
			return
		}
		if snd.data.any() && (snd.size == 0 || !strings.HasPrefix(snd.digest, "sha256:")) {
			t.Fatalf("data without size or digest: %+v", snd)
		}
		if strings.Contains(snd.to.target(), "?") {
			t.Fatalf("a query reached the target: %q", snd.to.target())
		}
		if len(snd.to.path) > pol.Browser().MaxOffSitePathBytes && !strings.EqualFold(snd.to.host, "shop.example") && snd.data.any() {
			t.Fatalf("a long path reached the target: %q", snd.to.path)
		}
	})
}

// BenchmarkClassify is the per-request cost of deciding whether a read of
// another site carries data (every request the proxy sees).
func BenchmarkClassify(b *testing.B) {
	p := New(Config{})
	b.Cleanup(func() { _ = p.Close() })
	s := &session{run: "r", lang: "en-US,en;q=0.9"}
	pol := policy.Default()
	req := request{method: "GET", url: "https://fonts.gstatic.com/s/roboto/v30/KFOmCnqEu92Fr1Mu4mxKKTU1Kg.woff2", header: chromiumImage()}
	b.ReportAllocs()
	for b.Loop() {
		if p.classify(pol, s, req, "shop.example") != nil {
			b.Fatal("a plain read was decided")
		}
	}
}

// TestRequestKey: a URL Gatehouse saw before Chromium asked for it (a
// redirect's Location, the agent's goto) and the request Chromium makes for
// it share a key however the first was spelt; different requests do not.
func TestRequestKey(t *testing.T) {
	same := [][2]string{
		{"http://LocalHost:8080/a?b=c", "http://localhost:8080/a?b=c"},
		{"HTTP://example.com:80/a", "http://example.com/a"},
		{"https://example.com:443/", "https://example.com"},
		{"http://u:p@example.com/a#frag", "http://example.com/a"},
		{"http://example.com/x/../a/./b", "http://example.com/a/b"},
		{"http://example.com/a b?q=<x>", "http://example.com/a%20b?q=%3Cx%3E"},
		{"http://bücher.example/", "http://xn--bcher-kva.example/"},
		{"http://[::1]:80/a", "http://[::1]/a"},
	}
	for _, c := range same {
		if a, b := requestKey("get", c[0]), requestKey("GET", c[1]); a != b {
			t.Errorf("%q and %q: %q != %q", c[0], c[1], a, b)
		}
	}
	differ := [][2]string{
		{"http://example.com/a", "http://example.com/b"},
		{"http://example.com/a", "https://example.com/a"},
		{"http://example.com:8080/a", "http://example.com/a"},
		{"http://example.com/a?x=1", "http://example.com/a?x=2"},
		{"http://a.example.com/", "http://b.example.com/"},
	}
	for _, c := range differ {
		if requestKey("GET", c[0]) == requestKey("GET", c[1]) {
			t.Errorf("%q and %q share a key", c[0], c[1])
		}
	}
	if requestKey("GET", "http://example.com/") == requestKey("POST", "http://example.com/") {
		t.Error("the method is not in the key")
	}
}

// FuzzRequestKey: a Location or goto is untrusted; requestKey never panics,
// ignores the case of scheme, host and method, and the fragment.
func FuzzRequestKey(f *testing.F) {
	f.Add("GET", "http://Example.com:80/a/../b?c=d#e")
	f.Add("post", "https://[::1]:443/%zz?%")
	f.Add("GET", "http://bücher.example/ü")
	f.Fuzz(func(t *testing.T, method, rawURL string) {
		k := requestKey(method, rawURL)
		if !strings.HasPrefix(k, strings.ToUpper(method)+" ") {
			t.Fatalf("key %q does not start with the method", k)
		}
		u, err := url.Parse(rawURL)
		if err != nil || u.Host == "" || strings.Contains(rawURL, "#") {
			return
		}
		if f, err := url.Parse(rawURL + "#frag"); err == nil && f.Host != "" && requestKey(method, rawURL+"#frag") != k {
			t.Fatalf("a fragment changed the key of %q", rawURL)
		}
		if up := strings.ToUpper(u.Scheme) + rawURL[len(u.Scheme):]; requestKey(method, up) != k {
			t.Fatalf("the scheme's case changed the key of %q", rawURL)
		}
	})
}

// BenchmarkRequestKey is the cost of the key every request the proxy sees
// is noted under (arrived), and every request Chromium reports (issue).
func BenchmarkRequestKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = requestKey("GET", "https://fonts.gstatic.com/s/roboto/v30/KFOmCnqEu92Fr1Mu4mxKKTU1Kg.woff2")
	}
}

// TestInitiator: a request to the run's site names the document that made
// it in Origin, else Referer; one that names neither but crossed sites
// comes from an origin it hides.
func TestInitiator(t *testing.T) {
	cases := []struct {
		h       http.Header
		from    string
		foreign bool
	}{
		{http.Header{}, "", false},
		{http.Header{"Origin": {"http://shop.example"}}, "shop.example", false},
		{http.Header{"Origin": {"http://evil.example:81"}}, "evil.example:81", true},
		{http.Header{"Origin": {"null"}, "Referer": {"http://evil.example/x"}}, "evil.example", true},
		{http.Header{"Referer": {"http://SHOP.example/x"}}, "shop.example", false},
		{http.Header{"Origin": {"null"}, "Sec-Fetch-Site": {"cross-site"}}, OpaqueOrigin, true},
		{http.Header{"Sec-Fetch-Site": {"same-origin"}}, "", false},
		{http.Header{"Referer": {"data:text/html,x"}}, OpaqueOrigin, true},
	}
	for _, c := range cases {
		from, foreign := initiator(c.h, "shop.example")
		if from != c.from || foreign != c.foreign {
			t.Errorf("%v: (%q, %v), want (%q, %v)", c.h, from, foreign, c.from, c.foreign)
		}
	}
}

// TestCorsAllows: the site's answer to a preflight lets the request follow
// only when it says so for the origin, the method and every header.
func TestCorsAllows(t *testing.T) {
	req := http.Header{"Origin": {"http://shop.example"}, "Access-Control-Request-Method": {"PUT"},
		"Access-Control-Request-Headers": {"x-a, x-b"}}
	ok := http.Header{"Access-Control-Allow-Origin": {"http://shop.example"}, "Access-Control-Allow-Methods": {"GET, PUT"},
		"Access-Control-Allow-Headers": {"X-A", "x-b"}}
	resp := func(code int, h http.Header) *http.Response { return &http.Response{StatusCode: code, Header: h} }
	if !corsAllows(resp(204, ok), req) {
		t.Error("an answer that allows all was taken for a refusal")
	}
	if corsAllows(resp(403, ok), req) {
		t.Error("a 403 allows")
	}
	for _, drop := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers"} {
		h := ok.Clone()
		h.Del(drop)
		if corsAllows(resp(204, h), req) {
			t.Errorf("without %s it allows", drop)
		}
	}
	ext := req.Clone()
	ext.Set("Access-Control-Request-Method", "Secret")
	h := ok.Clone()
	h.Set("Access-Control-Allow-Methods", "SECRET")
	if corsAllows(resp(204, h), ext) {
		t.Error("an extension method is compared without case")
	}
	pna := req.Clone()
	pna.Set("Access-Control-Request-Private-Network", "true")
	if corsAllows(resp(204, ok), pna) {
		t.Error("a private network request allowed without Access-Control-Allow-Private-Network")
	}
}
