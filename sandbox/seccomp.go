package sandbox

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompProgram assembles the filter every confined tier installs: io_uring (which bypasses the socket and
// file hooks the filter and Landlock see), kernel keyrings, bpf, perf_event_open and userfaultfd are refused.
// With hostNS (the child shares the host's network and user namespaces: the Landlock tier), socket() is refused for every family but AF_UNIX, or for every family when unixToo (Landlock
// below ABI 9 cannot stop connect() to a pathname unix socket outside the workspace), and creating a
// user namespace is refused (unshare, clone with CLONE_NEWUSER; clone3, whose flags a filter cannot read,
// fails with ENOSYS so libc falls back to clone).
//
// Syscalls of another ABI (i386 int 0x80, x32) kill the process: the library's own arch check lets them
// through to the default action, so a prefix is added. The result is raw struct sock_filter bytes.
func seccompProgram(hostNS, unixToo bool) ([]byte, error) {
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	enosys := seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)
	groups := []seccomp.SyscallGroup{
		{Action: enosys, Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
		{Action: eperm, Names: []string{"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd"}},
	}
	if hostNS {
		sock := seccomp.NameWithConditions{Name: "socket", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX},
		}}
		if unixToo {
			groups = append(groups, seccomp.SyscallGroup{Action: eperm, Names: []string{"socket"}})
		} else {
			groups = append(groups, seccomp.SyscallGroup{Action: eperm, NamesWithCondtions: []seccomp.NameWithConditions{sock}})
		}
		groups = append(groups,
			seccomp.SyscallGroup{Action: eperm, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "unshare", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}},
				{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}},
			}},
			seccomp.SyscallGroup{Action: enosys, Names: []string{"clone3"}},
		)
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, err
	}
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	prefix := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	raw, err := bpf.Assemble(append(prefix, insts...))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// installSeccomp installs a filter from seccompProgram on the calling thread (no_new_privs must be set).
func installSeccomp(prog []byte) error {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("seccomp: bad program length %d", len(prog))
	}
	filters := make([]unix.SockFilter, len(prog)/8)
	for i := range filters {
		b := prog[i*8:]
		filters[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
