package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// How the offline readers (Verify, CheckCheckpoint, the export's proofs,
// broker/evidence) open what a journal folder holds. Whoever holds the
// folder chooses what is in it, and a verifier must answer, not hang: a
// named pipe waits for a writer for ever, /dev/zero never ends, a symbolic
// link leads out of the folder. So every file is opened with OpenRegular
// (no link followed, nothing blocks, a regular file or an error) and whole
// files are read with ReadRegular, which bounds what it reads. Lines are
// bounded by scanLines (MaxLineBytes).

// ErrNotRegular is returned for a path that is a symbolic link, a
// directory, a named pipe, a device or a socket.
var ErrNotRegular = errors.New("journal: not a regular file")

// ErrTooLarge is returned by ReadRegular for a file larger than its bound.
var ErrTooLarge = errors.New("journal: file too large")

// OpenRegular opens path for reading if it is a regular file. A symbolic
// link is not followed (O_NOFOLLOW: the journal writer never makes one),
// and the open never blocks (O_NONBLOCK, which opening a named pipe would
// otherwise do until a writer comes); anything but a regular file is
// closed at once and refused with ErrNotRegular.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrNotRegular, path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, path, fileKind(fi.Mode()))
	}
	return f, nil
}

// ReadRegular reads the whole regular file at path (OpenRegular), at most
// max bytes; a larger one is ErrTooLarge, having read max+1 bytes.
func ReadRegular(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, path, max)
	}
	return b, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// Bounds of the whole files readers take in.
const (
	// MaxProofsBytes bounds an export's proofs/proofs.json: an inclusion
	// proof of about 1 KiB for each of a million head entries.
	MaxProofsBytes = 1 << 30
	// MaxManifestBytes bounds an export's export.json.
	MaxManifestBytes = 64 << 20
	// maxWALSegmentRead bounds one segment of the writer's log as verify
	// reads it; the writer starts a new segment long before.
	maxWALSegmentRead = 1 << 30
)

// oversizeTail is the detail of a file that ends in more unterminated
// bytes than any journal line holds: not an interrupted write (the writer
// never writes a line that long), so a finding, not a note.
func oversizeTail(n int64, after int) string {
	return fmt.Sprintf("%d bytes without a newline after line %d, more than a journal line may hold (%d bytes): not an interrupted write",
		n, after, MaxLineBytes)
}

// explainedGap reports whether the gap of n events between the records on
// lines a and b of a run file lies on lines that could not be read
// (malformed, in file order): the malformed-line findings already say so,
// and a second "event N missing" would send the reader looking for an
// event that is there, unreadable.
func explainedGap(malformed []int, a, b int, n uint64) bool {
	lo, hi := min(a, b), max(a, b)
	var k uint64
	for _, l := range malformed {
		if l > lo && l < hi {
			k++
		}
	}
	return k >= n
}
