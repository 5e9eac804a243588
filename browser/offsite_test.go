package browser

import (
	"net/http"
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
	read := func(url string) *send {
		return p.classify(pol, s, request{method: "GET", url: url, header: chromiumImage()}, "shop.example")
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
