package main

import (
	"fmt"

	"github.com/gatehouse/gatehouse/broker"
)

// streamFlags bound the streams agents fill: the peer queue and outputs
// (broker.StreamLimits; discard-new, so a full stream refuses new
// messages and never deletes stored ones).
type streamFlags struct {
	peerMB, outputMB, messageKB, perSubject int
}

func (f *streamFlags) register(fs *flagSet) {
	d := broker.DefaultStreamLimits
	fs.intVar(&f.peerMB, "peer-max-mb", int(d.MaxBytes>>20), "bound of the peer message stream GATEHOUSE_PEER in MiB; when full, new peer messages fail (outcome stream-full) and none stored is deleted")
	fs.intVar(&f.outputMB, "output-max-mb", int(d.MaxBytes>>20), "bound of the outputs stream GATEHOUSE_OUTPUTS in MiB; when full, new outputs fail (outcome stream-full) and none stored is deleted")
	fs.intVar(&f.messageKB, "stream-max-message-kb", int(d.MaxMsgSize>>10), "bound of one peer message or output in KiB; a larger body, task or result is refused before it is decided (TOO_LARGE)")
	fs.intVar(&f.perSubject, "stream-max-per-subject", int(d.MaxMsgsPerSubject), "messages kept at most per peer queue subject (one recipient, one run) and per run's outputs; past it new ones fail (stream-full)")
}

// limits returns the peer and output streams' bounds, or an error naming
// the flag that is out of range. A zero (a serveConfig made without its
// flags) is the default.
func (f *streamFlags) limits() (peer, output broker.StreamLimits, err error) {
	switch {
	case f.peerMB < 0:
		return peer, output, fmt.Errorf("--peer-max-mb must be at least 1")
	case f.outputMB < 0:
		return peer, output, fmt.Errorf("--output-max-mb must be at least 1")
	case f.messageKB < 0 || f.messageKB == 1 || f.messageKB > 64<<10:
		return peer, output, fmt.Errorf("--stream-max-message-kb must be 2 to 65536")
	case f.perSubject < 0:
		return peer, output, fmt.Errorf("--stream-max-per-subject must be at least 1")
	}
	l := broker.StreamLimits{MaxMsgSize: int32(f.messageKB) << 10, MaxMsgsPerSubject: int64(f.perSubject)}
	peer, output = l, l
	peer.MaxBytes, output.MaxBytes = int64(f.peerMB)<<20, int64(f.outputMB)<<20
	return peer.OrDefault(), output.OrDefault(), nil
}
