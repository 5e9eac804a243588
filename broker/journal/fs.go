package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// FS is the filesystem a Writer writes through: its lock, its log, the
// run files and the head log. The zero WriterOptions use the operating
// system's (OSFS). Tests pass one that records every write and fsync and
// can lose what was not synced, to check that nothing is acknowledged
// before it is durable.
//
// Names are slash-separated paths as the os package takes them. Files
// opened for appending are opened with os.O_APPEND.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	MkdirAll(name string, perm fs.FileMode) error
	Remove(name string) error
	Rename(oldname, newname string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	// Lstat is os.Lstat.
	Lstat(name string) (fs.FileInfo, error)
	// Lock takes an exclusive lock on the file name (created if needed)
	// for as long as the returned Closer is open; ErrLocked when another
	// holds it.
	Lock(name string) (io.Closer, error)
}

// File is an open file of an FS. Sync makes its data and size durable;
// on a directory, the names in it.
type File interface {
	io.Reader
	io.Writer
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
}

// dataSyncer is a File that can make its data durable without its
// metadata (fdatasync): enough for the log, whose size is allocated
// ahead.
type dataSyncer interface{ Datasync() error }

// OSFS is the operating system's filesystem. Files opened to be written
// are opened with O_NOFOLLOW, so a symbolic link planted in a journal is
// never written through; read-only opens (a folder to fsync, which may
// itself be a link to where the journal lives) follow links.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC) != 0 {
		flag |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (OSFS) Remove(name string) error                     { return os.Remove(name) }
func (OSFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (OSFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }

// Lock takes a non-blocking flock on name.
func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("journal: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", name, err)
	}
	return f, nil
}

// roomTeller is an FS that can say how many bytes are free on the
// filesystem holding dir (for an unprivileged writer).
type roomTeller interface {
	Room(dir string) (int64, error)
}

var _ roomTeller = OSFS{}

// Room is statfs(2)'s available blocks times their size.
func (OSFS) Room(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

type osFile struct{ *os.File }

func (f osFile) Datasync() error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// syncDir fsyncs the directory name, so the names created in it are
// durable.
func syncDir(fsys FS, name string) error { return syncPath(fsys, name) }

// syncPath fsyncs the file (or directory) name through a descriptor of
// its own (the writer's may have been closed since it wrote).
func syncPath(fsys FS, name string) error {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
