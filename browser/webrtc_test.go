package browser_test

// WebRTC: pages, a same-site frame, a frame of another site and a worker
// try every ICE server kind against STUN/TURN servers of this test's own on
// loopback (UDP, TCP, TLS), whose names carry the secret. Chromium sends no
// UDP at all; TURN over TCP and TLS goes through the proxy, where each is a
// connect effect: refused in strict mode, recorded in report mode.

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// iceServers are a STUN/TURN server on UDP, one on TCP and one on TLS.
// Each counts what it receives: packets or connections, and how many STUN
// messages named a USERNAME carrying the marker.
type iceServers struct {
	udp       net.PacketConn
	tcp, tls  net.Listener
	mu        sync.Mutex
	packets   int // UDP datagrams
	conns     int // TCP and TLS connections
	usernames int // STUN messages whose USERNAME carries the marker
	wg        sync.WaitGroup
}

func startICE(t *testing.T) *iceServers {
	s := &iceServers{}
	var err error
	if s.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if s.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	// The TLS server has site A's certificate (valid for 127.0.0.1), which
	// the pool's proxy trusts.
	if s.tls, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: tlsA.TLS.Certificates}); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		b := make([]byte, 4096)
		for {
			n, from, err := s.udp.ReadFrom(b)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.packets++
			s.usernames += stunUsernames(b[:n])
			s.mu.Unlock()
			if reply := turnChallenge(b[:n]); reply != nil {
				_, _ = s.udp.WriteTo(reply, from)
			}
		}
	}()
	for _, ln := range []net.Listener{s.tcp, s.tls} {
		go func() {
			defer s.wg.Done()
			var conns sync.WaitGroup
			defer conns.Wait()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.mu.Lock()
				s.conns++
				s.mu.Unlock()
				conns.Add(1)
				go func() {
					defer conns.Done()
					defer c.Close()
					s.serveStream(c)
				}()
			}
		}()
	}
	t.Cleanup(func() {
		s.udp.Close()
		s.tcp.Close()
		s.tls.Close()
		s.wg.Wait()
	})
	return s
}

// serveStream reads STUN messages from a TCP or TLS connection, counting
// them, and answers each request with a 401 challenge, so a TURN client
// sends its USERNAME next.
func (s *iceServers) serveStream(c net.Conn) {
	for {
		head := make([]byte, 20)
		if _, err := io.ReadFull(c, head); err != nil {
			return
		}
		msg := append(head, make([]byte, binary.BigEndian.Uint16(head[2:4]))...)
		if _, err := io.ReadFull(c, msg[20:]); err != nil {
			return
		}
		s.mu.Lock()
		s.usernames += stunUsernames(msg)
		s.mu.Unlock()
		if reply := turnChallenge(msg); reply != nil {
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}

// turnChallenge answers a STUN request with an error response: 401 with a
// realm and a nonce; nil for anything that is not a request.
func turnChallenge(req []byte) []byte {
	if len(req) < 20 || binary.BigEndian.Uint32(req[4:8]) != 0x2112A442 || req[0]&0x01 != 0 || req[1]&0x10 != 0 {
		return nil
	}
	attr := func(typ uint16, v []byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, typ)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	var attrs []byte
	attrs = append(attrs, attr(0x0009, []byte{0, 0, 4, 1})...)  // ERROR-CODE 401
	attrs = append(attrs, attr(0x0014, []byte("gatehouse"))...) // REALM
	attrs = append(attrs, attr(0x0015, []byte("nonce-1"))...)   // NONCE
	method := binary.BigEndian.Uint16(req[0:2]) & 0x3EEF
	typ := method | 0x0110 // error response class
	out := binary.BigEndian.AppendUint16(nil, typ)
	out = binary.BigEndian.AppendUint16(out, uint16(len(attrs)))
	out = append(out, req[4:20]...) // magic cookie and transaction id
	return append(out, attrs...)
}

func (s *iceServers) counts() (packets, conns, usernames int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.packets, s.conns, s.usernames
}

// stunUsernames counts the STUN messages in b (a datagram, or a TCP
// stream of them) whose USERNAME attribute carries the marker.
func stunUsernames(b []byte) int {
	n := 0
	for len(b) >= 20 && binary.BigEndian.Uint32(b[4:8]) == 0x2112A442 {
		size := int(binary.BigEndian.Uint16(b[2:4]))
		if len(b) < 20+size {
			break
		}
		for attrs := b[20 : 20+size]; len(attrs) >= 4; {
			typ, l := binary.BigEndian.Uint16(attrs[:2]), int(binary.BigEndian.Uint16(attrs[2:4]))
			if len(attrs) < 4+l {
				break
			}
			if typ == 0x0006 && bytes.Contains(bytes.ToLower(attrs[4:4+l]), []byte(marker)) {
				n++
			}
			attrs = attrs[4+(l+3)&^3:]
		}
		b = b[20+size:]
	}
	return n
}

// webrtcScript gathers ICE candidates against every server kind and says
// "done" in #out once gathering completes (or it cannot start).
const webrtcScript = `
function ice(q, done) {
  if (typeof RTCPeerConnection === 'undefined') { done('no-webrtc'); return; }
  const u = 'SeCrEt-user', c = 'x', L = '` + "secret-turnname" + `';
  const pc = new RTCPeerConnection({iceServers: [
    {urls: 'stun:127.0.0.1:' + q.get('u')},
    {urls: 'turn:127.0.0.1:' + q.get('u') + '?transport=udp', username: u, credential: c},
    {urls: 'turn:127.0.0.1:' + q.get('t') + '?transport=tcp', username: u, credential: c},
    {urls: 'turns:127.0.0.1:' + q.get('s') + '?transport=tcp', username: u, credential: c},
    {urls: 'stun:' + L + '.localhost:' + q.get('u')},
  ]});
  pc.createDataChannel('d');
  pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') done('done'); };
  pc.createOffer().then(o => pc.setLocalDescription(o));
  setTimeout(() => done('done'), 8000);
}
const q = new URLSearchParams(location.search || location.hash.slice(1));
`

// webrtcSite serves the WebRTC pages on site A and, for the frame of
// another site, on site B; false for a path it does not know.
func webrtcSite(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case "/webrtc.html":
		fmt.Fprint(w, `<!doctype html><h1>webrtc</h1><p id="out"></p><script>`+webrtcScript+`
const out = s => { document.getElementById('out').textContent = s; };
const frame = src => { const f = document.createElement('iframe'); f.src = src + '#' + location.search.slice(1); document.body.appendChild(f);
  addEventListener('message', e => out(String(e.data))); };
document.title = 'webrtc';
</script>
<button id="page" onclick="ice(q, out)">page</button>
<button id="frame" onclick="frame('/webrtc-frame.html')">frame</button>
<button id="other-frame" onclick="frame(q.get('b') + '/webrtc-frame.html')">other</button>
<button id="worker" onclick="const w = new Worker('/webrtc-worker.js' + location.search); w.onmessage = e => out(e.data)">worker</button>`)
	case "/webrtc-frame.html":
		fmt.Fprint(w, `<script>`+webrtcScript+`ice(q, s => parent.postMessage(s, '*'));</script>`)
	case "/webrtc-worker.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `const q = new URLSearchParams(location.search);
postMessage(typeof RTCPeerConnection === 'undefined' ? 'no-webrtc' : 'has-webrtc');`)
	default:
		return false
	}
	return true
}

// TestWebRTC: no UDP leaves Chromium for any host, from a page, a frame of
// its site, a frame of another site or a worker; TURN over TCP and TLS is
// a connect through the proxy, refused in strict mode and recorded in
// report mode, in both host forms.
func TestWebRTC(t *testing.T) {
	a := strings.TrimPrefix(siteA.URL, "http://127.0.0.1")
	for _, form := range []struct{ name, page string }{{"ports", siteA.URL}, {"localhost", "http://localhost" + a}} {
		for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
			t.Run(form.name+"/"+string(mode), func(t *testing.T) {
				ice := startICE(t)
				env := start(t, mode, "")
				run := openRun(t, env)
				q := url.Values{"u": {fmt.Sprint(ice.udp.LocalAddr().(*net.UDPAddr).Port)},
					"t": {fmt.Sprint(ice.tcp.Addr().(*net.TCPAddr).Port)}, "s": {fmt.Sprint(ice.tls.Addr().(*net.TCPAddr).Port)},
					"b": {siteB.URL}}
				for _, who := range []string{"page", "frame", "other-frame", "worker"} {
					do(t, env, run, browser.ActionGoto, map[string]any{"url": form.page + "/webrtc.html?" + q.Encode()})
					do(t, env, run, browser.ActionClick, map[string]any{"selector": "#" + who})
					var got string
					waitFor(t, who+"'s ICE gathering", func() bool {
						r := do(t, env, run, browser.ActionText, map[string]any{"selector": "#out"})
						var v struct{ Text string }
						json.Unmarshal(r.Result, &v)
						got = v.Text
						return got == "done" || got == "no-webrtc"
					})
					if (who == "worker") != (got == "no-webrtc") {
						t.Fatalf("%s: %q", who, got)
					}
				}
				pool.CloseRun(run)
				packets, conns, usernames := ice.counts()
				if packets != 0 {
					t.Fatalf("%d UDP datagrams reached the STUN/TURN server", packets)
				}
				var connects []decided
				for _, d := range decisions(t, env, run, policy.BrowserConnect) {
					if d.Refusal != policy.RefuseBrowserSendOffSite || d.PageHost != hostOf2(form.page) {
						t.Fatalf("connect decision = %+v", d.Decision)
					}
					connects = append(connects, d)
				}
				// TURN over TCP and over TLS, from the page and both frames.
				if len(connects) < 2 {
					t.Fatalf("%d connect decisions, want TURN over TCP and TLS decided", len(connects))
				}
				if mode == policy.ModeStrict {
					for _, d := range connects {
						if d.Outcome != journal.OutcomeRefused {
							t.Fatalf("strict mode let a tunnel out: %+v", d.Decision)
						}
					}
					if conns != 0 || usernames != 0 {
						t.Fatalf("strict mode: the TURN servers had %d connections, %d usernames", conns, usernames)
					}
				} else if conns == 0 || usernames == 0 {
					t.Fatalf("report mode: the TURN servers had %d connections, %d usernames: the test proves nothing", conns, usernames)
				}
				env.Verify(t)
				env.NoContent(t, marker)
			})
		}
	}
}
