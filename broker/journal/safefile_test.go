package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// replaceWith turns path into a file of kind: a named pipe, a symbolic
// link to /dev/zero or to a regular file outside the folder, a folder.
func replaceWith(t tb, path, kind, outside string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "dev-zero":
		err = os.Symlink("/dev/zero", path)
	case "link-outside":
		err = os.Symlink(outside, path)
	case "dir":
		err = os.Mkdir(path, 0o700)
	default:
		t.Fatalf("kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Verify and the checkpoint check refuse anything in the folder that is
// not a regular file: they report it, and never wait on a pipe, read
// /dev/zero for ever or follow a link out of the folder.
func TestReadersRefuseNonRegularFiles(t *testing.T) {
	for _, file := range []string{headFile, runsDir + "/" + runA + runExt} {
		for _, kind := range []string{"fifo", "dev-zero", "link-outside", "dir"} {
			t.Run(file+"/"+kind, func(t *testing.T) {
				dir := t.TempDir()
				writeJournal(t, dir, fixedEvents(t), 3)
				outside := filepath.Join(t.TempDir(), "copy")
				if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || os.WriteFile(outside, b, 0o600) != nil {
					t.Fatal(err)
				}
				tree, err := BuildTree(dir)
				if err != nil {
					t.Fatal(err)
				}
				root, _ := tree.Root(tree.Size())
				replaceWith(t, filepath.Join(dir, file), kind, outside)

				rep := verify(t, dir)
				if rep.OK {
					t.Fatalf("verify passed with %s a %s:\n%s", file, kind, dump(rep))
				}
				got := CheckCheckpoint(dir, &Checkpoint{Origin: "o", Size: tree.Size(), Hash: root})
				if file == headFile && len(got) == 0 {
					t.Fatalf("the checkpoint check passed with the head log a %s", kind)
				}
				if _, err := OpenRegular(filepath.Join(dir, file)); !errors.Is(err, ErrNotRegular) {
					t.Fatalf("OpenRegular(%s a %s) = %v, want ErrNotRegular", file, kind, err)
				}
			})
		}
	}
}

func TestReadRegularIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(path, 100); err != nil || len(b) != 100 {
		t.Fatalf("ReadRegular at its bound: %d bytes, %v", len(b), err)
	}
	if _, err := ReadRegular(path, 99); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadRegular past its bound: %v", err)
	}
}

// A file ending in more unterminated bytes than a journal line may hold
// is a finding: the writer never writes such a line, so it is no
// interrupted write.
func TestOversizeUnterminatedTailIsAFinding(t *testing.T) {
	for _, file := range []string{headFile, runsDir + "/" + runA + runExt} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			writeJournal(t, dir, fixedEvents(t), 3)
			f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(bytes.Repeat([]byte("a"), 5<<20)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			rep := verify(t, dir)
			if rep.OK || hasNote(rep, NotePartialLine, "") || hasNote(rep, NotePartialLine, runA) {
				t.Fatalf("a 5 MiB unterminated tail:\n%s", dump(rep))
			}
			want := FindingMalformedLine
			if file == headFile {
				want = FindingHeadLogEdited
			}
			if !hasFinding(rep, want, "", 0) {
				t.Fatalf("no %s finding:\n%s", want, dump(rep))
			}
		})
	}
	// A short unterminated tail stays what it is: an interrupted write.
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 3)
	f, _ := os.OpenFile(runPath(dir, runA), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte(`{"seq":9,`))
	f.Close()
	if rep := verify(t, dir); !rep.OK || !hasNote(rep, NotePartialLine, runA) {
		t.Fatalf("a short unterminated tail:\n%s", dump(rep))
	}
}

// A malformed line is reported as such, and not again as the event it
// held gone missing.
func TestMalformedLineIsNotAlsoAMissingEvent(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 3)
	lines := readLines(t, runPath(dir, runA))
	lines[1] = []byte("this is not an event\n")
	writeLines(t, runPath(dir, runA), lines)
	rep := verify(t, dir)
	if !hasFinding(rep, FindingMalformedLine, runA, 0) {
		t.Fatalf("no malformed-line finding:\n%s", dump(rep))
	}
	if hasFinding(rep, FindingSequenceGap, runA, 0) {
		t.Fatalf("a malformed line also reported as a missing event:\n%s", dump(rep))
	}
	// A line removed is still a missing event.
	dir = t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 3)
	lines = readLines(t, runPath(dir, runA))
	writeLines(t, runPath(dir, runA), append(lines[:1:1], lines[2:]...))
	if rep := verify(t, dir); !hasFinding(rep, FindingSequenceGap, runA, 2) {
		t.Fatalf("a removed event not reported missing:\n%s", dump(rep))
	}
}

// FuzzVerifyFiles runs verify and the checkpoint check over a journal
// whose run file and head log are truncated anywhere, and either may be
// replaced by a named pipe, a link to /dev/zero or outside, or a folder:
// they must return (never hang), and OK must agree with the findings.
func FuzzVerifyFiles(f *testing.F) {
	f.Add(uint16(0), uint16(0), byte(0))
	f.Add(uint16(300), uint16(50), byte(1))
	f.Add(uint16(1000), uint16(9999), byte(2))
	f.Add(uint16(7), uint16(120), byte(3))
	f.Add(uint16(65535), uint16(65535), byte(9))
	f.Fuzz(func(t *testing.T, runCut, headCut uint16, kind byte) {
		dir := t.TempDir()
		writeJournal(t, dir, fixedEvents(t), 3)
		cut := func(path string, n uint16) {
			if b, err := os.ReadFile(path); err == nil && int(n) < len(b) {
				os.WriteFile(path, b[:n], 0o600)
			}
		}
		cut(runPath(dir, runA), runCut)
		cut(filepath.Join(dir, headFile), headCut)
		kinds := []string{"fifo", "dev-zero", "link-outside", "dir"}
		if k := int(kind % 10); k < 2*len(kinds) {
			file := filepath.Join(dir, headFile)
			if k >= len(kinds) {
				file = runPath(dir, runA)
			}
			replaceWith(t, file, kinds[k%len(kinds)], filepath.Join(t.TempDir(), "absent"))
		}
		rep, err := Verify(dir, VerifyOptions{Workers: 1})
		if err != nil {
			return // not a journal at all (both files gone): a usage error, fine
		}
		if rep.OK != (len(rep.Findings) == 0) {
			t.Fatal("OK disagrees with findings")
		}
		_ = CheckCheckpoint(dir, &Checkpoint{Origin: "o", Size: 3})
	})
}
