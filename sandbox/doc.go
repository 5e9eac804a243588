// Package sandbox runs a program with limits, confined when this machine can confine it, and proves the
// confinement by a self-test rather than assuming it.
//
// # Tiers
//
// Detect tries the tiers of Config.Tiers in order (default: bubblewrap, namespaces, landlock, unconfined) and
// keeps the first whose self-test passes every probe. Facts below were measured on the target machine (Debian
// 12, kernel 6.18, root, user namespaces enabled, Landlock ABI 7, cgroup v1).
//
//   - bubblewrap: /usr/bin/bwrap (0.8+, not setuid) execed by the helper after it switched to the sandbox
//     uid (65534 by default). Every namespace is new; nested user namespaces are disabled (--disable-userns);
//     the child sees read-only /usr (with /bin, /lib symlinks), four /etc files (ld.so.cache, localtime,
//     passwd, group), the workspace at /work, a minimal /dev, its own /proc and a sized tmpfs /tmp; --cap-drop
//     ALL, --clearenv, --new-session, --die-with-parent, and the seccomp filter below. bwrap is never started
//     as root: as root it was seen to remount a read-only bind read-write and to read root-only files. The
//     uid switch happens in the helper (setresuid) rather than via SysProcAttr.Credential because the helper
//     binary may sit where that uid cannot reach it (go test builds in a 0700 folder); the effect on bwrap is
//     the same: real, effective and saved uid are the sandbox uid and it holds no capability.
//   - namespaces: the helper is cloned by Go with new user, mount, pid, net, ipc, uts and cgroup namespaces,
//     uid and gid 0 inside mapped to the sandbox uid and gid (with Credential{0,0}, without which the child
//     would keep host root's credentials), executed through a descriptor since it already runs as the sandbox
//     uid. It builds the same file system view on a tmpfs, pivot_roots into it, brings lo up, writes 0 to
//     /proc/sys/user/max_user_namespaces (no nested user namespace), drops every capability for good
//     (securebits NOROOT and friends, locked; empty bounding and ambient sets; capset 0), sets no_new_privs,
//     installs the seccomp filter and execs the program as pid 1.
//   - landlock: no namespaces (for machines where user namespaces are disabled). The helper switches to the
//     sandbox uid, creates a strict Landlock ruleset for the kernel's ABI (refusing below ABI 6; never
//     BestEffort, which enforces nothing where Landlock is missing): read and execute /usr, read /proc and the
//     four /etc files, read and write a few /dev nodes, everything in the workspace; no TCP bind or connect;
//     signals and abstract unix sockets scoped to the child's domain. Because Landlock at ABI 7 covers neither
//     UDP (ABI 10) nor pathname unix sockets (ABI 9), the seccomp filter refuses socket() for every family but
//     AF_UNIX, and for AF_UNIX too below ABI 9 (socketpair still works), and refuses creating user
//     namespaces. The child shares the host's pid namespace: it can see host processes in /proc, but Landlock
//     keeps it from signalling or ptracing them. Its working folder is the workspace's host path, not /work.
//   - unconfined: only the limits and the uid switch. The child reaches the network, reads what the sandbox
//     uid may read and writes what it may write. The policy refuses model-written code and model-chosen host
//     commands here in strict mode (unconfined-execution) unless a deployment rule accepts the risk.
//
// All confined tiers install a seccomp filter refusing io_uring (it bypasses the socket hooks), kernel
// keyrings, bpf, perf_event_open and userfaultfd, and killing any syscall made through another ABI (i386,
// x32), which the library's own arch check would let through.
//
// # Self-test
//
// For each tier, Detect starts real listeners on the host (TCP and UDP on 127.0.0.1, a unix socket file of
// mode 0777), writes a 0644 secret and picks a canary path in a folder of mode 0777, so that file modes alone
// would let every escape through. It then runs this binary's probe (HelperArg "probe", copied into the
// workspace) inside the tier. The probe must fail to connect over TCP and unix, get no datagram to the host,
// fail to create the canary and to read the secret, see CapEff, CapPrm and CapAmb 0 in /proc/self/status,
// fail to create a user namespace and to remount /, and succeed in writing its workspace. The host then counts
// what its listeners received and checks the canary is absent and the workspace file present. A tier is
// confined only when every probe holds; a tier that cannot start (no bwrap, user namespaces disabled: "no space
// left on device", "Creating new namespace failed", Landlock missing) is reported with its error and skipped.
// The result is cached in the Sandbox Detect returns; `gatehouse sandbox check` prints the Report.
//
// # Limits and the process tree
//
// The host starts the helper in its own process group, moves it into a fresh cgroup v1 pids cgroup
// (pids.max = Limits.Processes) before sending it its config, so nothing of the run forks outside the cgroup.
// The helper sets RLIMIT_CPU (SIGXCPU, then SIGKILL a second later), RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NOFILE and
// RLIMIT_CORE 0 as its last step before exec, so they hold through bwrap and in every tier. The host kills the
// tree when the wall time passes, ctx ends, or pids.events shows a refused fork (Killed "processes"), and in
// any case as soon as the program exits: SIGKILL to the process group, to the helper (pid 1 of the pid
// namespace in the bubblewrap and namespaces tiers, whose death ends every process in it), and to every pid
// left in the cgroup after pids.max is set to 0, until it is empty. A setsid grandchild therefore never
// survives, and Wait never hangs on a pipe it holds (cmd.WaitDelay bounds it anyway). Without a writable
// cgroup v1 pids hierarchy (Config.CgroupRoot "-", or not root) the process limit falls back to RLIMIT_NPROC,
// which counts every process of the sandbox uid on the host, not of the run, and a setsid grandchild can only
// be killed where the tier has a pid namespace: a documented best effort. Memory is bounded per process by
// RLIMIT_AS, so exhausting it makes allocations fail (Python raises MemoryError) rather than killing; Killed
// "memory" is reserved for a future cgroup memory limit and not set today. Go programs need a Memory limit of
// several GiB, since the Go runtime reserves address space up front.
//
// # Descriptors and the gateway
//
// The program holds exactly stdin (the Spec's, else /dev/null), stdout and stderr (capture pipes) and, with
// Spec.Gateway, fd 3 (requests, write) and fd 4 (replies, read), in every tier; verified by listing
// /proc/self/fd inside each (gateway_test.go). The helper gets its config on fd 3, its status fd on 4, its own
// binary on 5 (namespaces) and the gateway's ends on 6 and 7; before anything else it moves the status fd to 10
// or above (close-on-exec; bwrap gets it without, and does not pass it to its child), puts the gateway's ends
// on 3 and 4 (or closes 3 and 4), and marks every other descriptor from 5 up close-on-exec with
// close_range(CLOSE_RANGE_CLOEXEC). That last step matters beyond the gateway: Go's exec closes only
// close-on-exec descriptors, so any descriptor the broker process inherited without the flag (from a shell or
// a supervisor) used to reach the program in every tier. bwrap keeps inherited descriptors by default and
// closes its own (the seccomp pipe, the status fd); pivot_root, Landlock and the seccomp filter do not touch
// open descriptors, and the landlock tier's ban on socket() does not concern pipes.
//
// The gateway is served on one goroutine per Run, one request at a time, in order: lines of at most
// MaxGatewayLine bytes, each answered by exactly one line; an oversized, empty or non-JSON line is answered
// with a BAD_REQUEST error reply (the broker's error shape) and never reaches Spec.Gateway. Serving ends when
// the program closes fd 3, closes fd 4 (its next reply fails), or ends; a call in progress then finishes, the
// lines not yet read are dropped, and Run returns once the goroutine has. A program that never reads its
// replies blocks itself once the pipes fill, and ends at the wall limit.
//
// # Concurrency and ownership
//
// A Sandbox is immutable after Detect and safe for concurrent Runs. Every goroutine a Run or a self-test starts
// (status reader, exit watcher, gateway server, listener loops, exec's copiers) ends before it returns. Workspaces made by Run
// are removed when it returns; a given Workspace is kept, chowned to the sandbox uid, and written with symbolic
// links refused, so a link left by an earlier run cannot redirect a host-side write.
package sandbox
