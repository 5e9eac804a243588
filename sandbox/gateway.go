package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
)

// The gateway as the program sees it (Spec.Gateway): it writes one JSON request per line to GatewayOutFD and
// reads one JSON reply per line from GatewayInFD; the environment variables name both.
const (
	GatewayOutFD  = 3
	GatewayInFD   = 4
	EnvGatewayOut = "GATEHOUSE_GATEWAY_OUT"
	EnvGatewayIn  = "GATEHOUSE_GATEWAY_IN"
)

// MaxGatewayLine bounds one gateway request line, without its newline.
const MaxGatewayLine = 1 << 20

// GatewayFault is the Code of the replies the gateway itself gives, for a line it cannot pass on (too long,
// empty, not one JSON value) or a reply the host gave that is not JSON. Replies have the shape of the broker's
// error replies, {"error":{"code":"BAD_REQUEST","message":"..."}}, so a program reads every reply one way.
const (
	GatewayFault         = "BAD_REQUEST"
	gatewayInternalFault = "INTERNAL"
)

// gateway serves one run's Spec.Gateway: the host's ends of the two pipes and the goroutine reading requests.
// Run owns it: serve runs on one goroutine and ends when the program closes its request end, when its reply
// end is gone, or when shutdown is called; shutdown waits for it.
type gateway struct {
	fn func(ctx context.Context, request []byte) []byte

	req, rep          *os.File // host: read requests, write replies
	childOut, childIn *os.File // the program's ends, closed here once the helper has them

	stop chan struct{}
	done chan struct{}
}

func newGateway(fn func(context.Context, []byte) []byte) (*gateway, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	return &gateway{fn: fn, req: reqR, rep: repW, childOut: reqW, childIn: repR,
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// started closes the program's ends in this process (the helper holds its own copies), so that the program's
// exit is seen as end of file and a reply to a program that is gone fails instead of blocking.
func (g *gateway) started() {
	g.childOut.Close()
	g.childIn.Close()
}

// closeAll releases everything of a gateway whose serve never ran.
func (g *gateway) closeAll() {
	g.started()
	g.req.Close()
	g.rep.Close()
}

// serve answers requests one at a time, in order, until the program closes its end, its reply end is gone,
// or shutdown; every line gets exactly one reply line.
func (g *gateway) serve(ctx context.Context) {
	defer close(g.done)
	defer g.req.Close()
	defer g.rep.Close()
	br := bufio.NewReaderSize(g.req, 64<<10)
	for {
		line, tooLong, err := readLine(br, MaxGatewayLine)
		if err != nil {
			return // the program closed its request end, or shutdown closed ours
		}
		select {
		case <-g.stop:
			return // the program has ended: nothing is served on its behalf after that
		default:
		}
		var reply []byte
		switch {
		case tooLong:
			reply = gatewayError(GatewayFault, "gateway: a request line is limited to "+strconv.Itoa(MaxGatewayLine)+" bytes; this one was longer and was not read")
		case len(bytes.TrimSpace(line)) == 0:
			reply = gatewayError(GatewayFault, "gateway: empty line; write one JSON request per line")
		case !json.Valid(line):
			reply = gatewayError(GatewayFault, "gateway: the line is not one JSON value; write one JSON request per line")
		default:
			reply = compactReply(g.fn(ctx, line))
		}
		if _, err := g.rep.Write(append(reply, '\n')); err != nil {
			return // the program closed its reply end or has ended: it gets no more calls
		}
	}
}

// shutdown stops serving once the program has ended: a call in progress finishes (the Gateway func is given
// Run's ctx, so it ends with it), nothing further is read, and the goroutine is waited for.
func (g *gateway) shutdown() {
	close(g.stop)
	g.req.Close() // unblocks a read in progress
	g.rep.Close() // unblocks a reply to a program that never read
	<-g.done
}

// readLine reads one line of at most max bytes (without its newline and a trailing \r). A longer line is
// read to its end and discarded, and tooLong is set. A partial line at end of file is dropped with the error.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > max {
			tooLong, line = true, nil
		}
		return line, tooLong, nil
	}
}

// compactReply makes the host's reply one line, or an error reply when it is not JSON.
func compactReply(b []byte) []byte {
	var out bytes.Buffer
	if len(b) == 0 || json.Compact(&out, b) != nil {
		return gatewayError(gatewayInternalFault, "gateway: the host gave no usable reply")
	}
	return out.Bytes()
}

func gatewayError(code, msg string) []byte {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{code, msg}})
	return b
}

// gatewayEnv is env with the gateway's variables set (and any the caller gave under those names dropped).
func gatewayEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, e := range env {
		if strings.HasPrefix(e, EnvGatewayOut+"=") || strings.HasPrefix(e, EnvGatewayIn+"=") {
			continue
		}
		out = append(out, e)
	}
	return append(out, EnvGatewayOut+"="+strconv.Itoa(GatewayOutFD), EnvGatewayIn+"="+strconv.Itoa(GatewayInFD))
}
