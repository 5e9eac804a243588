package browser

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// TestPeekHead: a tunnel's WebSocket handshake is read whole up to
// maxTunnelHead, a large cookie jar included; one that does not fit, or is
// malformed, still says it started as a GET, so the proxy decides it
// rather than piping it as the run's own read; anything else is not HTTP.
func TestPeekHead(t *testing.T) {
	handshake := func(extra int) string {
		return "GET /chat?" + strings.Repeat("x", extra) + " HTTP/1.1\r\nHost: site.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: http://evil.test\r\n\r\n"
	}
	for _, tc := range []struct {
		name        string
		in          string
		head, start bool
	}{
		{"small", handshake(10), true, true},
		{"over net/http's 4 KiB", handshake(5000), true, true},
		{"over the bound", handshake(maxTunnelHead), false, true},
		{"malformed", "GET \x00\r\n\r\n", false, true},
		{"not HTTP", "\x00\x01TURN", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			go func() { _, _ = client.Write([]byte(tc.in)) }()
			// As net/http hands a hijacked connection over: 4 KiB buffered.
			br := bufio.NewReaderSize(bufio.NewReaderSize(server, 4096), maxTunnelHead)
			head, started := peekHead(server, br)
			if (head != nil) != tc.head || started != tc.start {
				t.Fatalf("head %v, started %v; want head %v, started %v", head != nil, started, tc.head, tc.start)
			}
			if head != nil && head.Header.Get("Origin") != "http://evil.test" {
				t.Fatalf("origin %q", head.Header.Get("Origin"))
			}
		})
	}
}
