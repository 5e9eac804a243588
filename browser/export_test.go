package browser

// RuntimeProxyURL is the runtime's proxy listener, for tests that send to
// it as the browser's own traffic would; "" before the browser starts.
func (p *Pool) RuntimeProxyURL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtProxy == nil {
		return ""
	}
	return p.rtProxy.url()
}

// CrashBrowser closes Chromium under the pool, as a crash would leave it:
// disconnected, with every context gone.
func (p *Pool) CrashBrowser() {
	p.mu.Lock()
	br := p.br
	p.mu.Unlock()
	if br != nil {
		_ = br.Close()
	}
}

// IgnoreCertificateErrorsForTest makes Chromium accept any certificate, so
// a benchmark can compare a blind tunnel (mode off) to a self-signed site
// with the proxy's interception. Call it before the browser starts.
func (p *Pool) IgnoreCertificateErrorsForTest() {
	p.testArgs = append(p.testArgs, "--ignore-certificate-errors")
}
