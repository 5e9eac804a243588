// Package sandbox runs a program with limits, confined when this machine can confine it, and proves the
// confinement by a self-test rather than assuming it.
//
// # Tiers
//
// Detect tries the tiers of Config.Tiers in order (default: bubblewrap, namespaces, landlock, unconfined) and
// keeps the first whose self-test passes every probe. Facts below were measured on the target machine (Debian
// 12, kernel 6.18, root, user namespaces enabled, Landlock ABI 7, cgroup v1).
//
//   - bubblewrap: /usr/bin/bwrap (0.8+, not setuid) execed by the helper after it switched to the run's
//     sandbox uid (see Identities). Every namespace is new; nested user namespaces are disabled (--disable-userns);
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
//     namespaces. The child shares the host's pid namespace, so /proc is where it would see the host: the
//     ruleset grants nothing of /proc but a few of the program's own entries (/proc/<pid>/status, stat,
//     statm, cmdline, limits, auxv, uid_map, gid_map and the fd folder, named by the helper's pid, which
//     the program keeps across exec) and /proc/cpuinfo and /proc/meminfo, and nothing of /sys but the two
//     CPU lists libc reads. So /proc cannot be listed, no other process's command line, environment or
//     status can be read by pid (not even one of the same uid, which file modes would show), /proc/<pid>/net
//     (the host's sockets) and mountinfo are closed, and Landlock's scopes keep it from signalling or
//     ptracing anything outside its domain. Landlock grants by inode, so a child the program forks cannot
//     read its own /proc/self, and an entry the kernel evicts from its cache and makes anew becomes
//     unreadable: both fail closed (CPython, sh and Go programs do not need them). Before this, the tier
//     granted all of /proc and a program listed every host process with its command line. Its working folder
//     is the workspace's host path, not /work.
//   - unconfined: only the limits and the identity of RunHost (see Identities): a uid of its own, no
//     capability, no_new_privs, and its own pid and mount namespaces with a /proc of its own where the host
//     allows them. The child reaches the network, reads what its uid may read and writes what it may write.
//     The policy refuses model-written code and model-chosen host commands here in strict mode
//     (unconfined-execution) unless a deployment rule accepts the risk.
//
// # Identities
//
// Programs never run as the broker. Config.UID, GID and UIDs name a range (default DefaultFirstUID..+255,
// uids no account holds; --sandbox-uid FIRST-LAST): each run leases a uid of its own for its whole life,
// host-wide, by an exclusive flock on DefaultLeaseDir/<uid>.lock (held by this process, close-on-exec; the
// kernel drops it if the process dies), so two runs in flight, in one broker or in two on the same host,
// never share a uid: one cannot read the other's working folder, or signal, ptrace or read the /proc
// entries of its processes, by file modes alone. A lease is given back once no process of the run is left
// and its temporary workspace is removed; a kept workspace (Spec.Workspace) is handed back to the broker's
// user first. A range of one uid (--sandbox-uid 65534) is shared by every run and not leased: weaker,
// logged at start. With neither a pid namespace nor a cgroup (the landlock tier where cgroup v1 pids is not
// writable), a setsid grandchild could outlive its run; as the uid is the run's alone, every process still
// running as it is killed before the lease is given back, so the next holder of the uid never meets it.
//
// The helper becomes the uid as root's last act before the tier (becomeUser): an empty bounding set, no
// ambient capabilities, securebits NOROOT and NO_CAP_AMBIENT_RAISE locked, no supplementary group,
// real/effective/saved uid and gid switched, capset to nothing, each checked afterwards; the parent-death
// signal is set again (a uid change clears it), and no_new_privs follows in every mode, so a setuid or
// file-capability binary gains nothing. The helper sets umask 077 in every mode, so what a program creates
// in the host's shared folders (/tmp, /dev/shm: a host command sees the host's) is not readable by another
// run's uid unless the program says so.
//
// RunHost (the process sink) and the unconfined tier run the same way ("plain" mode): the helper is pid 1 of
// fresh pid and mount namespaces (cloned by the host; as root, no user namespace is needed), makes / private,
// detaches every proc mount of the host's (/proc and any other: a container's, a chroot's) and mounts a proc
// of its own pid namespace on /proc. The program sees the host's files and network but no other process:
// not the broker's command line (world-readable in the host's /proc) nor another run's, and it cannot name
// one to signal or ptrace; its exit ends its tree. It still sees /sys, including the cgroup folder that
// names the runs' cgroups, and it has an IPC namespace of its own. Where the host refuses those namespaces
// (root in a container without CAP_SYS_ADMIN), plain mode runs without them (HostReport.OwnPID false): a
// separate uid still keeps the broker's 0600 files, its environment and its ptrace out of reach.
//
// A uid comes round again (a range's after its other uids, --sandbox-uid N at once), and the next run that
// holds it, maybe another tenant's, could read whatever the last one left where every user may write. So
// when a lease is given back (for the one uid of a range of one: when the last run of this process holding
// it ends), what the uid owns directly in /tmp, /var/tmp and /dev/shm, and in their sticky world-writable
// folders, is removed (removeLeftovers), nothing of the uid running any more; System V IPC goes with the
// run's IPC namespace. The host's temporary folders stay the host's: a host command still sees them and may
// write into a folder someone opened to it. What it leaves in such a folder, or elsewhere its uid may write,
// is not removed.
//
// A process that cannot switch uids (canSwitchUID: CAP_SETUID, CAP_SETGID and CAP_SETPCAP effective and the
// range mapped in its user namespace; euid 0 is not the test) runs programs as its own ids. The confined
// tiers still hold (bubblewrap and the namespaces tier map its own uid, Landlock needs no privilege), and
// keep the broker's files out of view; but RunHost and the unconfined tier would run as the broker's user,
// which owns DATA_DIR. SeparateUID reports false then, with the reason in HostReport.Err, and callers refuse
// such runs where they must (the process and code sinks answer ErrNoSeparateUID as UNAVAILABLE in strict
// mode, and record uid and separate_uid in report mode). Result.UID and Result.SeparateUID say what a run
// got. The default work root of such a process is /tmp/gatehouse-sandbox-<euid>; a work root that another
// user owns or may write is refused (ErrWorkspace).
//
// All confined tiers install a seccomp filter refusing io_uring (it bypasses the socket hooks), kernel
// keyrings, bpf, perf_event_open and userfaultfd, and killing any syscall made through another ABI (i386,
// x32), which the library's own arch check would let through.
//
// # Self-test
//
// For each tier, Detect starts real listeners on the host (TCP and UDP on 127.0.0.1, a unix socket file of
// mode 0777), writes a 0644 secret and picks a canary path in a folder of mode 0777, so that file modes alone
// would let every escape through; it also writes a 0600 file of the broker's in a 0755 folder of the
// broker's (as DATA_DIR holds its keys) and starts a host process of the run's own uid (a sleep whose
// command line and environment carry a mark; the mark reaches the probe in a workspace file, not its
// environment, which bwrap's own command line would repeat). It then runs this binary's probe (HelperArg
// "probe", copied into the workspace) inside the tier. The probe must fail to connect over TCP and unix, get
// no datagram to the host, fail to create the canary and to read the secret, see CapEff, CapPrm and CapAmb 0
// in /proc/self/status, fail to create a user namespace and to remount /, see no_new_privs set, fail to read
// the broker's file or create one in its folder, fail kill(0) of the broker, and (proc-hidden, signal-host,
// ptrace-host) neither find the host process's mark in any /proc entry it can list or open by pid, nor the
// broker's command line, nor signal the process, nor PTRACE_SEIZE it; and it must succeed in writing its
// workspace. The host then counts what its listeners received, checks the canary and a planted file are
// absent, the workspace file present and owned by the run's uid (own-uid: reported, not required of a tier,
// which a broker that is not root runs as its own uid), and the host process still running. A tier is
// confined only when every probe of allProbes holds: a tier that shows other processes is treated as
// unconfined, and strict mode refuses model code in it. A tier that cannot start (no bwrap, user namespaces
// disabled: "no space left on device", "Creating new namespace failed", Landlock missing) is reported with
// its error and skipped.
//
// Before the tiers, Detect runs the same probe the way RunHost runs a command (Report.Host): SeparateUID when
// own-uid, capabilities, no-new-privs, broker-files and signal-broker hold; OwnPID when plain mode's
// namespaces started and proc-hidden, signal-host and ptrace-host hold (it tries without the namespaces
// when they cannot start). The result is cached in the Sandbox Detect returns; `gatehouse sandbox check`
// prints the Report.
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
// which counts every process of the run's uid on the host (the run's alone, with a leased uid), and a setsid
// grandchild is killed with the pid namespace where the tier has one, else with the lease (see Identities). Memory is bounded per process by
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
// are removed when it returns; a given Workspace is kept, chowned to the run's uid for the run and back to the
// broker's user after it, and written with symbolic
// links refused, so a link left by an earlier run cannot redirect a host-side write.
package sandbox
