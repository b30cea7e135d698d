// allot-job-shim: supervises one job so that the job outlives the agent. The agent spawns it in
// a new session, or has its shim server (below) fork it; it
//   1. joins the job's cgroups, before anything else, so all that follows is confined;
//   2. sends its stdout/stderr to the job's log and closes every other inherited descriptor;
//   3. ignores SIGTERM/SIGINT/SIGHUP (stopping a job signals the job, never its supervisor);
//   4. starts the command (startChild: a child sharing its memory until the exec) in its own
//      process group, with default signal dispositions and an empty signal mask, and writes
//      "<pid> <start ticks>" to <job-dir>/pid;
//   5. closes the report descriptor once the exec has succeeded or failed: the agent's start()
//      waits for that;
//   6. waits, kills whatever is left in the job's process group, and writes the outcome to
//      <job-dir>/status.json (temporary file + rename), then exits.
// status.json is also read by JobDir (job_dir.cc); keep the two in step.
//
// Usage: allot-job-shim --job-fd N
// Descriptor N is a stream socket to the agent, which sends the job on it at once as one job
// message (below): the arguments
//     --job-dir DIR --log FILE --cwd DIR [--uid U --gid G [--groups G1,G2...]]
//     [--cgroup GROUP_DIR]... -- COMMAND [ARG]...
// and the job's environment. N is then the report descriptor of step 5.
// With --uid, the command runs as that user (docs/access.md, "Workloads run as their owner"):
// in step 4 the child sets its supplementary groups, gid and uid, in that order, before exec; the
// shim itself stays root to record the outcome and kill what the job leaves. uid or gid 0 is
// refused: a workload never runs as root.
// The job's environment never reaches a root process: the shim is started with an empty one
// (what it is given of its own is ignored), holds the job's as data, and the child installs it
// only after it has dropped to the job's owner, right before exec. So LD_PRELOAD,
// LD_LIBRARY_PATH, GCONV_PATH and the like act in the job, as they should, and never in the
// shim. For the same reason the job's command and environment do not travel as argv/envp of the
// shim.
//
// Standby: allot-job-shim --standby-fd N [--cgroup GROUP_DIR]...
// The agent starts one of these ahead of any job (see process_executor.h), so that step 1, which
// costs the kernel ~10 ms on cgroup v1, is paid before a job arrives. Its environment is empty and
// descriptor N is a stream socket to the agent. It closes every other inherited descriptor, joins
// the (spare, limit-free) groups, writes one byte 'R' to N, and waits. The agent writes the job's
// limits into the groups and then sends the job on N as a job message (without --cgroup: the
// standby's groups are the job's). From then on it is an ordinary shim from step 2, with N as
// its report descriptor. It runs nothing of the job's before the whole job has arrived; if N
// reaches end-of-file first (the agent exited or retired it) it exits with status 0 and writes
// nothing. If it cannot join a group it exits with status 1 without writing 'R'.
// process_executor.cc writes the other end; keep the two in step.
//
// Server: allot-job-shim --server-fd N [--cgroup-base DIR]...
// Starting a program costs more than forking one: exec, the loader and glibc's start-up (which
// on a virtual machine traps to the hypervisor dozens of times) were a third of a shim's CPU.
// So the agent keeps one shim as a server (shim_server.h) and has it fork every other shim.
// Descriptor N is a SOCK_SEQPACKET socket to the agent. Each request is one message whose
// payload is a shim's arguments, NUL-terminated ("--job-fd\0" "3\0", or "--standby-fd\0" "3\0"
// "--cgroup\0" DIR "\0"...), carrying exactly one descriptor (SCM_RIGHTS): the new shim's
// descriptor 3. The server clones itself with CLONE_PARENT, so the new shim is the agent's
// child, reaped by the agent like a spawned one, and answers with one int32: the new shim's pid,
// or -errno when it could not make one (a malformed request: -EINVAL). The new shim takes a
// session of its own, puts the descriptor at 3, and runs as `allot-job-shim ARGS...` would.
// The server holds nothing of any job's: the job itself only ever travels on the new shim's own
// socket. It exits when N reaches end-of-file (the agent is gone; an empty message, which the
// agent never sends, reads the same). Its children inherit its memory, rlimits and cgroups as
// they were when the agent spawned it, and it has an empty environment, stdin on /dev/null,
// and every signal at its default that glibc lets it reset (it does so at its start; glibc's
// own two, which posix_spawn leaves ignored, runChild resets for the job), so a shim forked
// from it starts as a spawned one would. A forked shim rewrites its command line (the server's,
// in memory it inherited) to `allot-job-shim --job-fd 3` or `--standby-fd 3`, so that what ps
// shows, and what `pkill -f` matches, tells shims from the server.
// The server must stay single-threaded and hold no lock when it clones: the clone is a raw
// system call, without glibc's fork handlers.
// Each DIR is a directory the agent makes job groups in: the server opens it (O_PATH) once, and a
// shim it forks joins any group directly in it relative to that descriptor, then closes them all
// before anything of the job's runs (CgroupBase below).
//
// The job message, on both paths:
//   <u32 length, host order><payload of `length` bytes>
//   payload: "<n>\0" then n NUL-terminated arguments, then "<m>\0" then m NUL-terminated
//            "KEY=VALUE" environment entries.
//
// A job in an image (docs/environments.md) adds
//     --container-rootfs DIR --layers-root DIR --upper DIR --overlay-work DIR [--lower HEX]...
// and its COMMAND is crun's (`crun ... run --bundle B ID`, from the executor). In step 4 the child
// then, still root, enters a mount namespace of its own (private propagation), hides a hybrid
// host's cgroup2 mount from crun (crun refuses hybrid layouts whose cgroup2 holds a controller;
// nothing changes outside this namespace), mounts the image's overlay (lower layers named
// relative to the layers root, topmost first; the upper and work directories the job's) on the
// rootfs directory (nodev, nosuid), and execs crun with a fixed PATH. The overlay goes with the
// namespace when the job ends, however it ends. crun, with its cgroup manager disabled, runs the
// container in the groups the shim joined, as the bundle's config.json says (user, no capabilities,
// no new privileges); it exits with the container's status.
//
// Only libc here: one shim runs per job for the job's whole life, so it should cost little.

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

// The most a standby accepts as one job: far above any real command line and environment.
constexpr uint32_t kMaxJobMessage = 64u << 20;

struct Args {
  std::string jobDir, log, cwd;
  int jobDirFd = -1;  // jobDir, once runJob has opened it: its records are written relative to it
  std::string workdir;  // entered after the switch to the owner; "" = stay in cwd
  int reportFd = -1;
  long long uid = -1, gid = -1;  // -1: run as the shim's own user
  std::vector<gid_t> groups;
  std::vector<std::string> cgroups;
  // A job in an image: where its overlay is mounted and from what (see the top of this file).
  std::string containerRootfs, layersRoot, upper, overlayWork;
  std::vector<std::string> lowers;
  std::vector<char*> command;  // null-terminated argv
  // The job's environment, null-terminated; installed in the child after it dropped privileges.
  std::vector<char*> env = {nullptr};
};

// A uid or gid as the agent writes it: decimal, at most 2^32 - 2 (uid_t is 32 bits, and -1 means
// "unchanged"). atoll took "1e3" as 1, and setuid cut 2^32 + 1000 to another user's 1000, and
// setgid 2^32 to root's group: anything else refuses the arguments. 0 passes, to be refused
// with a reason where the identity is checked.
bool parseId(const std::string& v, long long* out) {
  constexpr long long kMaxId = 4'294'967'294;
  if (v.empty() || v.size() > 10) return false;
  long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n > kMaxId) return false;
  *out = n;
  return true;
}

bool parseArgs(int argc, char** argv, Args* a) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (k == "--job-dir")
      a->jobDir = v;
    else if (k == "--log")
      a->log = v;
    else if (k == "--cwd")
      a->cwd = v;
    else if (k == "--workdir")
      a->workdir = v;
    else if (k == "--cgroup")
      a->cgroups.push_back(v);
    else if (k == "--container-rootfs")
      a->containerRootfs = v;
    else if (k == "--layers-root")
      a->layersRoot = v;
    else if (k == "--upper")
      a->upper = v;
    else if (k == "--overlay-work")
      a->overlayWork = v;
    else if (k == "--lower")
      a->lowers.push_back(v);
    else if (k == "--uid") {
      if (!parseId(v, &a->uid)) return false;
    } else if (k == "--gid") {
      if (!parseId(v, &a->gid)) return false;
    } else if (k == "--groups") {
      for (size_t pos = 0; pos < v.size();) {
        size_t comma = v.find(',', pos);
        if (comma == std::string::npos) comma = v.size();
        long long group = 0;
        if (!parseId(v.substr(pos, comma - pos), &group) || group == 0) return false;
        a->groups.push_back(static_cast<gid_t>(group));
        pos = comma + 1;
      }
    } else
      return false;
  }
  for (; i < argc; ++i) a->command.push_back(argv[i]);
  a->command.push_back(nullptr);
  if ((a->uid >= 0) != (a->gid >= 0)) return false;  // both or neither
  if (!a->containerRootfs.empty()) {
    // crun drops to the container's user itself; the overlay needs all of its parts, and a
    // lower layer is a name in the layers root, never a path.
    if (a->uid >= 0 || a->layersRoot.empty() || a->upper.empty() || a->overlayWork.empty() ||
        a->lowers.empty())
      return false;
    for (const auto& l : a->lowers) {
      if (l.empty() || l.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
    }
  }
  return !a->jobDir.empty() && !a->log.empty() && !a->cwd.empty() && a->command.size() > 1;
}

long long nowMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Writes <job dir>/name whole or not at all, to any reader: a temporary file, renamed. Relative
// to the job directory's descriptor once there is one (a walk of its path per file was a
// measurable part of a short job's cost). Not fsynced: like the agent's own job files
// (job_dir.cc) these need to outlive the agent, not the host, whose crash ends the job as well.
void writeAtomically(const Args& a, const std::string& name, const std::string& content) {
  const std::string tmp = name + ".tmp";
  const int dir = a.jobDirFd >= 0 ? a.jobDirFd : AT_FDCWD;
  const std::string prefix = a.jobDirFd >= 0 ? "" : a.jobDir + "/";
  int fd = openat(dir, (prefix + tmp).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "allot-job-shim: cannot write %s/%s: %s\n", a.jobDir.c_str(),
                 tmp.c_str(), std::strerror(errno));
    return;
  }
  writeAll(fd, content);
  close(fd);
  if (renameat(dir, (prefix + tmp).c_str(), dir, (prefix + name).c_str()) != 0) {
    std::fprintf(stderr, "allot-job-shim: cannot rename %s/%s: %s\n", a.jobDir.c_str(),
                 tmp.c_str(), std::strerror(errno));
  }
}

void writeFailedToStart(const Args& a, const std::string& message) {
  writeAtomically(a, "status.json",
                  "{\"state\":\"failed_to_start\",\"message\":" + jsonString(message) +
                      ",\"finished_at\":" + std::to_string(nowMs()) + "}\n");
}

void writeExited(const Args& a, int waitStatus) {
  std::string how = WIFSIGNALED(waitStatus)
                        ? "\"signal\":" + std::to_string(WTERMSIG(waitStatus))
                        : "\"exit_code\":" + std::to_string(WEXITSTATUS(waitStatus));
  writeAtomically(a, "status.json", "{\"state\":\"exited\"," + how + ",\"finished_at\":" +
                                        std::to_string(nowMs()) + "}\n");
}

// Field 22 of /proc/<pid>/stat: what, with the pid, names this process and no later one.
unsigned long long startTicks(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  unsigned long long ticks = 0;
  // After ')': state (field 3), then fields 4..21, then starttime.
  if (std::sscanf(
          p + 1,
          " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
          &ticks) != 1) {
    return 0;
  }
  return ticks;
}

// What the child sends on its close-on-exec pipe when it cannot become the job: which step
// failed and errno. Nothing arrives when exec succeeds.
struct ChildFailure {
  enum Step : int { kIdentity, kWorkdir, kExec, kContainer } step;
  int err;
};

[[noreturn]] void childFailed(int fd, ChildFailure::Step step, int err) {
  ChildFailure f{step, err};
  (void)!write(fd, &f, sizeof f);
  _exit(127);
}

std::string execError(const char* command, int err) {
  std::string c = command;
  switch (err) {
    case ENOENT:
      return "no such file '" + c + "'";
    case EACCES:
      return "permission denied '" + c + "'";
    case ENOEXEC:
      return "'" + c + "' is not an executable";
    default:
      return "cannot execute '" + c + "': " + std::strerror(err);
  }
}

// The directories the agent makes job groups in, as the shim server opened them (--cgroup-base),
// inherited by every shim it forks. A group directly in one is joined relative to it: a path from
// the mount root is looked up one cgroupfs directory at a time, each outside the kernel's
// lock-free walk, and the three joins' walks were a large part of a short job's shim.
struct CgroupBase {
  std::string path;
  int fd = -1;
};
std::vector<CgroupBase> gCgroupBases;

// Closes every descriptor above stderr except keep (-1: none) and the cgroup bases.
void closeInherited(int keep) {
  // The server's cgroup bases stay too, until the groups are joined (forgetCgroupBases).
  std::vector<int> kept;
  if (keep > STDERR_FILENO) kept.push_back(keep);
  for (const CgroupBase& b : gCgroupBases) kept.push_back(b.fd);
  std::sort(kept.begin(), kept.end());
  unsigned first = STDERR_FILENO + 1;
  bool ok = true;
  for (int fd : kept) {
    if (static_cast<unsigned>(fd) > first) ok = ok && close_range(first, fd - 1, 0) == 0;
    first = static_cast<unsigned>(fd) + 1;
  }
  ok = ok && close_range(first, ~0U, 0) == 0;
  if (ok) return;
  // Kernels before 5.9 lack close_range.
  long max = sysconf(_SC_OPEN_MAX);
  for (int fd = STDERR_FILENO + 1; fd < (max > 0 ? max : 1024); ++fd) {
    if (!std::binary_search(kept.begin(), kept.end(), fd)) close(fd);
  }
}

// The container's root: a mount namespace of this child's own with the image's overlay on the
// rootfs directory (see the top of this file).
void enterImage(const Args& a, const std::string& options, int execErrFd) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    childFailed(execErrFd, ChildFailure::kContainer, errno);
  // A hybrid host: cgroup v1 controllers plus a cgroup2 mount holding some controller.
  int controllers = open("/sys/fs/cgroup/unified/cgroup.controllers", O_RDONLY | O_CLOEXEC);
  if (controllers >= 0) {
    char c;
    const bool any = read(controllers, &c, 1) == 1 && c != '\n';
    close(controllers);
    if (any) (void)umount2("/sys/fs/cgroup/unified", MNT_DETACH);
  }
  // The lower layers are named relative to the layers root: the option string is one page.
  if (chdir(a.layersRoot.c_str()) != 0) childFailed(execErrFd, ChildFailure::kContainer, errno);
  if (mount("overlay", a.containerRootfs.c_str(), "overlay", MS_NODEV | MS_NOSUID,
            options.c_str()) != 0)
    childFailed(execErrFd, ChildFailure::kContainer, errno);
}

// A sealed in-memory copy of the program at `path`, to exec; -1 when it cannot be made. crun
// re-executes itself from a copy of its own unless it already runs from a fully sealed memfd
// (its defence against CVE-2019-5736, the same test as runc's; runc's memfd-bind hands it one
// too): a sealed copy cannot be written by anyone, the container included, and saves crun its
// second start, about 7 ms of a container's start on the 2-core CI machine.
int sealedCopy(const char* path) {
  int src = open(path, O_RDONLY | O_CLOEXEC);
  if (src < 0) return -1;
  int copy = memfd_create("crun", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  struct stat st {};
  bool ok = copy >= 0 && fstat(src, &st) == 0;
  for (off_t done = 0; ok && done < st.st_size;) {
    const ssize_t n = sendfile(copy, src, &done, static_cast<size_t>(st.st_size - done));
    ok = n > 0;
  }
  close(src);
  ok =
      ok && fcntl(copy, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0;
  if (!ok && copy >= 0) close(copy);
  return ok ? copy : -1;
}

// What runJob ignores; everything else is at its default in every shim (but glibc's own, see
// runChild): the agent spawns shims and the server with every signal's default
// (POSIX_SPAWN_SETSIGDEF), the server resets them all again at its start, and neither installs
// a handler.
constexpr int kIgnoredBySupervisor[] = {SIGTERM, SIGINT, SIGHUP};

// The overlay's mount options (see the top of this file).
std::string overlayOptions(const Args& a) {
  std::string options = "lowerdir=";
  for (size_t i = 0; i < a.lowers.size(); ++i) options += (i ? ":" : "") + a.lowers[i];
  return options + ",upperdir=" + a.upper + ",workdir=" + a.overlayWork;
}

// What the job's process starts from. It runs in the shim's memory until it execs (startChild),
// so it allocates nothing: what it needs is prepared here.
struct ChildStart {
  const Args* a;
  std::string overlayOptions;  // a job in an image
  int execErrFd;
};

[[noreturn]] void runChild(const ChildStart& start) {
  const Args& a = *start.a;
  const int execErrFd = start.execErrFd;
  setpgid(0, 0);
  // The shim ignores signals and the agent may block some; the job must start clean. Only the
  // supervisor's own changes need undoing (see kIgnoredBySupervisor): the other 60 sigaction
  // calls were a measurable part of a shim's start.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : kIgnoredBySupervisor) sigaction(sig, &dfl, nullptr);
  // Below SIGRTMIN lie glibc's own signals, which its sigaction() refuses to touch, and which
  // its posix_spawn() sets to "ignore" in every child it makes, the shim included. Ignored they
  // would stay in the job, whatever its libc; the kernel's call resets them (an all-zero
  // sigaction is SIG_DFL, no flags, an empty mask).
  for (int sig = 32; sig < SIGRTMIN; ++sig) {
    const unsigned long defaultAction[4] = {};
    constexpr size_t kKernelSigsetBytes = 8;  // the kernel's 64 signals, not glibc's sigset_t
    syscall(SYS_rt_sigaction, sig, defaultAction, nullptr, kKernelSigsetBytes);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!a.containerRootfs.empty()) enterImage(a, start.overlayOptions, execErrFd);
  if (a.uid >= 0) {
    errno = 0;
    // Groups first, uid last: once the uid is dropped nothing else may be changed.
    if (setgroups(a.groups.size(), a.groups.data()) != 0 || setgid(a.gid) != 0 ||
        setuid(a.uid) != 0 || getuid() == 0 || geteuid() == 0 ||
        getgid() != static_cast<gid_t>(a.gid) || getegid() != static_cast<gid_t>(a.gid))
      childFailed(execErrFd, ChildFailure::kIdentity, errno != 0 ? errno : EPERM);
  }
  // The working directory the submitter chose is entered as its owner, never as root: a path
  // the owner may not search (another user's home, /root) is refused like any of theirs.
  if (!a.workdir.empty() && chdir(a.workdir.c_str()) != 0)
    childFailed(execErrFd, ChildFailure::kWorkdir, errno);
  // Only now, as the owner: execvp looks the command up in the job's PATH, and the loader of the
  // job's program is the first to read LD_PRELOAD and its kind. (The shim's own environ, which
  // this child shares, startChild puts back.)
  environ = const_cast<char**>(a.env.data());
  if (!a.containerRootfs.empty()) {
    // crun, by its absolute path (the executor's): from a sealed copy when one can be made.
    if (const int crun = sealedCopy(a.command[0]); crun >= 0)
      fexecve(crun, a.command.data(), environ);
  }
  execvp(a.command[0], a.command.data());
  childFailed(execErrFd, ChildFailure::kExec, errno);
}

int childMain(void* start) { runChild(*static_cast<const ChildStart*>(start)); }

// Whether the job's child may share the shim's memory until it execs (startChild). It switches
// to the job's owner first, and from then on a process of the owner's that could ptrace it could
// write into the root shim. The kernel prevents that by making the (shared) memory non-dumpable
// when the uid changes, unless fs.suid_dumpable is 1 (a debugging setting): there the child is
// forked instead. A job that keeps the shim's identity (no --uid: a container, crun drops it
// later) shares nothing the shim does not.
bool childMayShareMemory(const Args& a) {
  if (a.uid < 0) return true;
  const int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char mode = 0;
  const bool read1 = read(fd, &mode, 1) == 1;
  close(fd);
  return read1 && (mode == '0' || mode == '2');
}

// Starts the job's process as posix_spawn does: a child that shares the shim's memory until it
// execs (CLONE_VM | CLONE_VFORK), on a stack of its own, while the shim waits. A fork copied the
// shim's page tables only for the exec to drop them, and took copy-on-write faults in both
// processes meanwhile: a tenth of a short job's cost. The child allocates nothing and writes
// nothing of the shim's but errno and environ (restored here). The shim waits for the exec: a
// child the job's owner stops (SIGSTOP, once it runs as them) or holds in a slow chdir holds its
// own shim, and only the job's, there. The pid, or -1 with errno.
pid_t startChild(const ChildStart& start) {
  if (!childMayShareMemory(*start.a)) {
    const pid_t pid = fork();
    if (pid == 0) runChild(start);
    if (pid > 0) setpgid(pid, pid);  // also here, so the group exists before anyone signals it
    return pid;
  }
  // execvp's PATH search, and its fallback for a script without "#!" (which copies argv), use
  // the stack; below it a page nothing may touch.
  const long page = sysconf(_SC_PAGESIZE);
  const size_t stackBytes =
      ((256 * 1024 + start.a->command.size() * sizeof(char*)) / page + 1) * page;
  const size_t mapped = stackBytes + page;
  void* low = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (low == MAP_FAILED) return -1;
  if (mprotect(low, page, PROT_NONE) != 0) {
    const int err = errno;
    munmap(low, mapped);
    errno = err;
    return -1;
  }
  char** const environment = environ;
  const pid_t pid = clone(childMain, static_cast<char*>(low) + mapped,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<ChildStart*>(&start));
  const int err = errno;
  environ = environment;
  munmap(low, mapped);
  errno = err;
  return pid;
}

// group/cgroup.procs, opened for writing: relative to the server's descriptor of the base the
// group is directly in, else by its path. Not found relative to a base: by the path too (the
// agent removed the base and made it again after the server opened it).
int openGroupProcs(const std::string& group) {
  for (const CgroupBase& b : gCgroupBases) {
    const size_t n = b.path.size();
    if (group.size() <= n + 1 || group.compare(0, n, b.path) != 0 || group[n] != '/') continue;
    const std::string name = group.substr(n + 1);
    if (name.find('/') != std::string::npos || name == "." || name == "..") break;
    const int fd = openat(b.fd, (name + "/cgroup.procs").c_str(),
                          O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 || errno != ENOENT) return fd;
    break;
  }
  return open((group + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
}

// Closes the server's cgroup bases: once its groups are joined a shim has no use for them, and
// the job must never get them.
void forgetCgroupBases() {
  for (const CgroupBase& b : gCgroupBases) close(b.fd);
  gCgroupBases.clear();
}

// Joins every group (writes "0", the writer itself, to its cgroup.procs: nothing depends on what
// getpid() says in a process the server cloned); false with *error set on the first that fails.
bool joinCgroups(const std::vector<std::string>& groups, std::string* error) {
  const std::string self = "0";
  for (const auto& group : groups) {
    int fd = openGroupProcs(group);
    if (fd < 0 || !writeAll(fd, self)) {
      *error = "cannot join cgroup " + group + ": " + std::strerror(errno);
      if (fd >= 0) close(fd);
      return false;
    }
    close(fd);
  }
  return true;
}

bool readAll(int fd, char* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Splits "<n>\0" + n strings from payload at *pos; false if it is malformed.
bool takeStrings(const std::string& payload, size_t* pos, std::vector<std::string>* out) {
  auto next = [&](std::string* s) {
    size_t end = payload.find('\0', *pos);
    if (end == std::string::npos) return false;
    *s = payload.substr(*pos, end - *pos);
    *pos = end + 1;
    return true;
  };
  std::string count;
  if (!next(&count) || count.empty() || count.size() > 9 ||
      count.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  for (long n = std::atol(count.c_str()); n > 0; --n) {
    std::string s;
    if (!next(&s)) return false;
    out->push_back(std::move(s));
  }
  return true;
}

enum class JobMessage { kOk, kNone, kMalformed };

// Reads one job message (top of this file) from fd into *a, with fd as its report descriptor.
// kNone: fd reached end-of-file before a job came. The strings live for the rest of the shim's
// life: a's argv and environment point into them.
JobMessage readJobMessage(int fd, char* argv0, Args* a) {
  uint32_t size = 0;
  if (!readAll(fd, reinterpret_cast<char*>(&size), sizeof size)) return JobMessage::kNone;
  if (size > kMaxJobMessage) {
    std::fprintf(stderr, "allot-job-shim: a job of %u bytes is too big\n", size);
    return JobMessage::kMalformed;
  }
  static std::string payload;
  payload.assign(size, '\0');
  if (!readAll(fd, payload.data(), size)) return JobMessage::kNone;
  static std::vector<std::string> args, env;
  size_t pos = 0;
  if (!takeStrings(payload, &pos, &args) || !takeStrings(payload, &pos, &env) ||
      pos != payload.size()) {
    std::fprintf(stderr, "allot-job-shim: malformed job message\n");
    return JobMessage::kMalformed;
  }
  static std::vector<char*> argvJob;
  argvJob = {argv0};
  for (auto& s : args) argvJob.push_back(s.data());
  argvJob.push_back(nullptr);
  if (!parseArgs(static_cast<int>(argvJob.size()) - 1, argvJob.data(), a)) {
    std::fprintf(stderr, "allot-job-shim: malformed job arguments\n");
    if (!a->jobDir.empty()) writeFailedToStart(*a, "allot-job-shim got malformed job arguments");
    return JobMessage::kMalformed;
  }
  a->env.clear();
  for (auto& s : env) a->env.push_back(s.data());
  a->env.push_back(nullptr);
  a->reportFd = fd;  // the agent waits on this socket's end-of-file as on any report descriptor
  return JobMessage::kOk;
}

// Steps 2-6: runs the job described by a, once the shim is in its groups.
int runJob(Args& a) {
  int log = open(a.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    writeFailedToStart(a, "cannot open log " + a.log + ": " + std::strerror(errno));
    return 1;
  }
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  close(log);
  // Whatever else the agent had open (its connection, its database) is not the job's business.
  closeInherited(a.reportFd);
  if (a.reportFd >= 0) fcntl(a.reportFd, F_SETFD, FD_CLOEXEC);
  // The agent's directory, root's alone: a descriptor saves a walk of its path per record.
  a.jobDirFd = open(a.jobDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);

  for (int sig : kIgnoredBySupervisor) signal(sig, SIG_IGN);

  if (a.uid == 0 || a.gid == 0) {
    writeFailedToStart(a, "refusing to run a workload as uid 0 or gid 0");
    return 1;
  }
  if (chdir(a.cwd.c_str()) != 0) {
    writeFailedToStart(a, "cannot enter working directory " + a.cwd + ": " + std::strerror(errno));
    return 1;
  }

  int execErr[2];
  if (pipe2(execErr, O_CLOEXEC) != 0) {
    writeFailedToStart(a, std::string("cannot create a pipe: ") + std::strerror(errno));
    return 1;
  }
  ChildStart start{&a, a.containerRootfs.empty() ? "" : overlayOptions(a), execErr[1]};
  // Its process group exists once this returns.
  pid_t child = startChild(start);
  if (child < 0) {
    writeFailedToStart(a, std::string("cannot fork: ") + std::strerror(errno));
    return 1;
  }
  close(execErr[1]);
  writeAtomically(a, "pid", std::to_string(child) + " " + std::to_string(startTicks(child)) + "\n");

  ChildFailure failure{};
  ssize_t n;
  do {
    n = read(execErr[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  close(execErr[0]);
  if (n == sizeof failure) {
    int ignored;
    waitpid(child, &ignored, 0);
    const int err = failure.err;
    writeFailedToStart(
        a, failure.step == ChildFailure::kIdentity
               ? "cannot switch to uid " + std::to_string(a.uid) + " gid " + std::to_string(a.gid) +
                     ": " + std::strerror(err)
           : failure.step == ChildFailure::kWorkdir
               ? "cannot enter working directory " + a.workdir + ": " + std::strerror(err)
           : failure.step == ChildFailure::kContainer
               ? "cannot mount the image's layers: " + std::string(std::strerror(err))
               : execError(a.command[0], err));
    if (a.reportFd >= 0) close(a.reportFd);
    return 0;
  }
  if (a.reportFd >= 0) close(a.reportFd);

  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // Background processes the job left behind would hold its GPUs; the job is over.
  kill(-child, SIGKILL);
  writeExited(a, status);
  return 0;
}

// The standby protocol described at the top of this file.
int runStandby(int argc, char** argv) {
  int fd = -1;
  std::vector<std::string> groups;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--standby-fd") {
      fd = std::atoi(argv[i + 1]);
    } else if (k == "--cgroup") {
      groups.push_back(argv[i + 1]);
    } else {
      fd = -1;
      break;
    }
  }
  if (fd <= STDERR_FILENO || argc % 2 == 0) {
    std::fprintf(stderr, "usage: allot-job-shim --standby-fd N [--cgroup DIR]...\n");
    return 2;
  }
  // A standby may wait a long time; it must not hold the agent's sockets or files meanwhile.
  closeInherited(fd);
  std::string error;
  const bool joined = joinCgroups(groups, &error);
  forgetCgroupBases();
  if (!joined) {
    std::fprintf(stderr, "allot-job-shim: standby: %s\n", error.c_str());
    return 1;
  }
  if (send(fd, "R", 1, MSG_NOSIGNAL) != 1) return 0;  // the agent is gone already

  Args a;
  switch (readJobMessage(fd, argv[0], &a)) {
    case JobMessage::kNone:
      return 0;  // retired: no job
    case JobMessage::kMalformed:
      return 2;
    case JobMessage::kOk:
      break;
  }
  a.cgroups = groups;
  return runJob(a);
}

// The direct path: the job's own shim, told the job on fd at once.
int runDirect(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--job-fd") != 0 || std::atoi(argv[2]) <= STDERR_FILENO) {
    std::fprintf(stderr,
                 "usage: allot-job-shim --job-fd N\n"
                 "       allot-job-shim --standby-fd N [--cgroup DIR]...\n"
                 "(the job comes on descriptor N; see job_shim_main.cc)\n");
    return 2;
  }
  const int fd = std::atoi(argv[2]);
  closeInherited(fd);
  Args a;
  if (readJobMessage(fd, argv[0], &a) != JobMessage::kOk) return 2;
  std::string error;
  const bool joined = joinCgroups(a.cgroups, &error);
  forgetCgroupBases();
  if (!joined) {
    // Refuse to run unconfined in a group we were told to use.
    writeFailedToStart(a, error);
    return 1;
  }
  return runJob(a);
}

// The descriptor a shim made by the server finds its socket on: what the agent names in the
// arguments it sends (process_executor.cc's kReportFd).
constexpr int kForkedShimFd = 3;
// The longest request: the arguments of a standby with a few cgroup paths, with room to spare.
constexpr size_t kMaxServerRequest = 64 * 1024;

int runShim(int argc, char** argv);

// The server's command line as the kernel shows it (/proc/<pid>/cmdline): one block of memory,
// which every forked shim inherits.
struct CommandLine {
  char* start = nullptr;
  size_t size = 0;
};

// Makes ps show `allot-job-shim ARGS...` for this process instead of the server's command line,
// as much of it as fits in the block (always `allot-job-shim --job-fd 3` and `--standby-fd 3`:
// the server's own is longer, its argv[0] being a path that ends in allot-job-shim).
void showAsShim(const CommandLine& line, const std::vector<std::string>& args) {
  if (line.size == 0) return;
  std::string text = "allot-job-shim";
  text += '\0';
  for (const auto& a : args) {
    text += a;
    text += '\0';
  }
  text.resize(line.size - 1, '\0');  // cut, or padded with NULs; the last byte stays NUL
  std::memcpy(line.start, text.data(), text.size());
  line.start[line.size - 1] = '\0';
}

// A shim as the agent's child, sharing nothing with the server but what both inherited from the
// agent. Never returns.
[[noreturn]] void becomeShim(int serverFd, int shimFd, std::vector<std::string>& args,
                             const CommandLine& line) {
  showAsShim(line, args);
  close(serverFd);
  if (shimFd != kForkedShimFd) {
    if (dup2(shimFd, kForkedShimFd) < 0) _exit(1);
    close(shimFd);
  } else {
    fcntl(shimFd, F_SETFD, 0);
  }
  // Its own session, as POSIX_SPAWN_SETSID gives a spawned shim: it outlives the agent and no
  // terminal's signal reaches it. Never a group leader (its pid is new), so this cannot fail.
  setsid();
  std::vector<char*> argv;
  static char name[] = "allot-job-shim";
  argv.push_back(name);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(runShim(static_cast<int>(argv.size()) - 1, argv.data()));
}

// Splits a request's payload into its NUL-terminated arguments; false if it is not that.
bool splitRequest(const char* data, size_t size, std::vector<std::string>* args) {
  if (size == 0 || data[size - 1] != '\0') return false;
  for (size_t pos = 0; pos < size;) {
    const size_t len = std::strlen(data + pos);
    args->emplace_back(data + pos, len);
    pos += len + 1;
  }
  return true;
}

// The server protocol described at the top of this file.
int runServer(int argc, char** argv) {
  const int fd = argc >= 3 ? std::atoi(argv[2]) : -1;
  std::vector<std::string> bases;
  bool usage = fd <= STDERR_FILENO || argc % 2 == 0;
  for (int i = 3; !usage && i + 1 < argc; i += 2) {
    usage = std::strcmp(argv[i], "--cgroup-base") != 0 || argv[i + 1][0] != '/';
    bases.push_back(argv[i + 1]);
  }
  if (usage) {
    std::fprintf(stderr, "usage: allot-job-shim --server-fd N [--cgroup-base DIR]...\n");
    return 2;
  }
  closeInherited(fd);
  // A base that cannot be opened is left out: its groups are joined by their paths.
  for (auto& base : bases) {
    const int baseFd = open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (baseFd >= 0) gCgroupBases.push_back({std::move(base), baseFd});
  }
  const CommandLine line{argv[0], static_cast<size_t>(argv[argc - 1] + std::strlen(argv[argc - 1]) +
                                                      1 - argv[0])};
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  static char payload[kMaxServerRequest];
  for (;;) {
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    iovec iov{payload, sizeof payload};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;  // end-of-file: the agent is gone
    // Every descriptor that came, however many: none may stay open here by mistake.
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int received;
        std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
        fds.push_back(received);
      }
    }
    std::vector<std::string> args;
    int32_t answer;
    if (fds.size() != 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
        !splitRequest(payload, static_cast<size_t>(n), &args)) {
      answer = -EINVAL;
    } else {
      // Nothing buffered may be written twice, by the server and by the child.
      std::fflush(nullptr);
      // fork(), but with the agent as the new process's parent. (Under CLONE_PARENT the kernel
      // gives the child the server's own exit signal, SIGCHLD as posix_spawn set it; the flag's
      // SIGCHLD says what is meant.)
      const long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
      if (pid == 0) becomeShim(fd, fds[0], args, line);
      answer = pid > 0 ? static_cast<int32_t>(pid) : -errno;
    }
    for (int received : fds) close(received);
    if (send(fd, &answer, sizeof answer, MSG_NOSIGNAL) != sizeof answer) return 1;
  }
}

int runShim(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--standby-fd") == 0) return runStandby(argc, argv);
  return runDirect(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  // Whatever environment the shim was started with is not the job's, and not trusted either.
  static char* empty[] = {nullptr};
  environ = empty;
  if (argc > 1 && std::strcmp(argv[1], "--server-fd") == 0) return runServer(argc, argv);
  return runShim(argc, argv);
}
