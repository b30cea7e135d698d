// allot-job-shim: supervises one job so that the job outlives the agent. The agent spawns it in
// a new session; it
//   1. joins the job's cgroups, before anything else, so all that follows is confined;
//   2. sends its stdout/stderr to the job's log and closes every other inherited descriptor;
//   3. ignores SIGTERM/SIGINT/SIGHUP (stopping a job signals the job, never its supervisor);
//   4. forks the command into its own process group, with default signal dispositions and an
//      empty signal mask, and writes "<pid> <start ticks>" to <job-dir>/pid;
//   5. closes the report descriptor once the exec has succeeded or failed: the agent's start()
//      waits for that;
//   6. waits, kills whatever is left in the job's process group, and writes the outcome to
//      <job-dir>/status.json (temporary file + rename), then exits.
// status.json is also read by JobDir (job_dir.cc); keep the two in step.
//
// Usage: allot-job-shim --job-dir DIR --log FILE --cwd DIR [--report-fd N]
//                       [--cgroup GROUP_DIR]... -- COMMAND [ARG]...
// The environment it is given is the job's.
//
// Only libc here: one shim runs per job for the job's whole life, so it should cost little.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string jobDir, log, cwd;
  int reportFd = -1;
  std::vector<std::string> cgroups;
  std::vector<char*> command;  // null-terminated argv
};

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
    else if (k == "--report-fd")
      a->reportFd = std::atoi(v.c_str());
    else if (k == "--cgroup")
      a->cgroups.push_back(v);
    else
      return false;
  }
  for (; i < argc; ++i) a->command.push_back(argv[i]);
  a->command.push_back(nullptr);
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

// Whole or absent, even across a host crash.
void writeAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "allot-job-shim: cannot write %s: %s\n", tmp.c_str(),
                 std::strerror(errno));
    return;
  }
  writeAll(fd, content);
  fsync(fd);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "allot-job-shim: cannot rename %s: %s\n", tmp.c_str(),
                 std::strerror(errno));
  }
}

void writeFailedToStart(const Args& a, const std::string& message) {
  writeAtomically(a.jobDir + "/status.json",
                  "{\"state\":\"failed_to_start\",\"message\":" + jsonString(message) +
                      ",\"finished_at\":" + std::to_string(nowMs()) + "}\n");
}

void writeExited(const Args& a, int waitStatus) {
  std::string how = WIFSIGNALED(waitStatus)
                        ? "\"signal\":" + std::to_string(WTERMSIG(waitStatus))
                        : "\"exit_code\":" + std::to_string(WEXITSTATUS(waitStatus));
  writeAtomically(a.jobDir + "/status.json", "{\"state\":\"exited\"," + how + ",\"finished_at\":" +
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

// Closes every descriptor above stderr except keep (-1: none).
void closeInherited(int keep) {
  const unsigned first = STDERR_FILENO + 1;
  bool ok;
  if (keep >= static_cast<int>(first)) {
    ok = (keep == static_cast<int>(first) || close_range(first, keep - 1, 0) == 0) &&
         close_range(keep + 1, ~0U, 0) == 0;
  } else {
    ok = close_range(first, ~0U, 0) == 0;
  }
  if (ok) return;
  // Kernels before 5.9 lack close_range.
  long max = sysconf(_SC_OPEN_MAX);
  for (int fd = first; fd < (max > 0 ? max : 1024); ++fd) {
    if (fd != keep) close(fd);
  }
}

[[noreturn]] void runChild(const Args& a, int execErrFd) {
  setpgid(0, 0);
  // The shim ignores signals and the agent may block some; the job must start clean.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvp(a.command[0], a.command.data());
  int err = errno;
  (void)!write(execErrFd, &err, sizeof err);
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: allot-job-shim --job-dir DIR --log FILE --cwd DIR [--report-fd N] "
                 "[--cgroup DIR]... -- COMMAND [ARG]...\n");
    return 2;
  }

  for (const auto& group : a.cgroups) {
    std::string procs = group + "/cgroup.procs";
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    std::string self = std::to_string(getpid());
    if (fd < 0 || !writeAll(fd, self)) {
      // Refuse to run unconfined in a group we were told to use.
      writeFailedToStart(a, "cannot join cgroup " + group + ": " + std::strerror(errno));
      return 1;
    }
    close(fd);
  }

  int log = open(a.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
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

  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);

  if (chdir(a.cwd.c_str()) != 0) {
    writeFailedToStart(a, "cannot enter working directory " + a.cwd + ": " + std::strerror(errno));
    return 1;
  }

  int execErr[2];
  if (pipe2(execErr, O_CLOEXEC) != 0) {
    writeFailedToStart(a, std::string("cannot create a pipe: ") + std::strerror(errno));
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    writeFailedToStart(a, std::string("cannot fork: ") + std::strerror(errno));
    return 1;
  }
  if (child == 0) runChild(a, execErr[1]);
  setpgid(child, child);  // also here, so the group exists before anyone signals it
  close(execErr[1]);
  writeAtomically(a.jobDir + "/pid",
                  std::to_string(child) + " " + std::to_string(startTicks(child)) + "\n");

  int err = 0;
  ssize_t n;
  do {
    n = read(execErr[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  close(execErr[0]);
  if (n == sizeof err) {
    int ignored;
    waitpid(child, &ignored, 0);
    writeFailedToStart(a, execError(a.command[0], err));
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
