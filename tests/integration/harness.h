#pragma once
// Harness for the integration tests: real allotd, allot-agent and allot processes on loopback,
// each test in a temp dir of its own.
//
// Process: one child started with posix_spawn, stdout and stderr in files, killed and reaped by
// its owner. runProgram/TestCluster::cli: run a command to completion and collect its output.
// waitFor: polls a condition; timeouts bound failures only, nothing waits for a fixed time.
// TestCluster: a GoogleTest fixture owning one allotd (restartable on the same port and data
// dir) and any number of named agents with simulated GPUs; TearDown kills every process the
// test started, jobs included, and removes the temp dir, whether the test passed or not.
//
// Helpers that cannot go on report failure by throwing std::runtime_error: GoogleTest fails
// the test with the message, and TearDown still runs.
//
// Threading: everything here is for the test's main thread, except httpRequest, which any
// thread may call.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace allot::it {

using json = nlohmann::json;
using namespace std::chrono_literals;

// The bound on any wait for the system to get somewhere. Generous: a loaded 2-core machine.
constexpr std::chrono::milliseconds kTimeout = 20s;

// Path of one of the binaries built with the tests (allotd, allot-agent, allot, ...).
std::string binPath(const std::string& name);

std::string readFile(const std::string& path);  // "" when missing
void writeFile(const std::string& path, const std::string& content);
std::string trim(const std::string& s);
// j[key] when it is a string, else "" (missing, null or another type).
std::string textOf(const json& j, const char* key);
std::string joinStrings(const std::vector<std::string>& parts, const std::string& sep);

// Polls `pred` every ~20 ms until it holds (true) or `timeout` passes (false).
bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = kTimeout);

// True when `pid` no longer runs: no such process, or a zombie nobody reaped yet.
bool processGone(pid_t pid);

// This process's environment, less the variables that would point the CLI elsewhere, plus
// `extra` ("KEY=VALUE" entries): what the processes a test starts get.
std::vector<std::string> childEnv(const std::vector<std::string>& extra);

// A child process with stdout and stderr redirected to files and stdin from /dev/null.
class Process {
 public:
  // `env`: the child's whole environment as KEY=VALUE entries.
  static std::unique_ptr<Process> spawn(const std::vector<std::string>& argv,
                                        const std::string& stdoutPath,
                                        const std::string& stderrPath,
                                        const std::vector<std::string>& env);
  ~Process();  // SIGKILL and reap if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();        // reaps it if it has ended
  void signal(int sig);  // no-op once reaped
  int wait();            // blocks; exit code, or 128+N for signal N
  // Waits at most `timeout`; nullopt (still running) when the time is up.
  std::optional<int> waitFor(std::chrono::milliseconds timeout);
  std::string stdoutText() const { return readFile(stdoutPath_); }
  std::string stderrText() const { return readFile(stderrPath_); }
  const std::string& stderrPath() const { return stderrPath_; }
  const std::string& name() const { return argv0_; }

 private:
  Process() = default;
  void reaped(int status);

  pid_t pid_ = -1;
  bool done_ = false;
  int exit_ = -1;
  std::string argv0_, stdoutPath_, stderrPath_;
};

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
  std::string command;  // for messages
  json parsed() const;  // stdout as JSON; throws when it is not
  std::string describe() const;
};

struct HttpResult {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  json parsed() const;                         // body as JSON; discarded value when it is not
};

// One request to allotd on 127.0.0.1:port. `target` goes out as given (path and query).
// Throws when no reply comes back.
HttpResult httpRequest(uint16_t port, const std::string& method, const std::string& target,
                       const std::string& body = "", const std::string& token = "",
                       const std::map<std::string, std::string>& headers = {});

// The fixture. Subclasses change allotd's flags by overriding serverFlags().
class TestCluster : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  virtual std::vector<std::string> serverFlags() const { return {"--heartbeat", "1s"}; }
  // Extra flags for every allot-agent this cluster starts.
  virtual std::vector<std::string> agentFlags() const { return {}; }
  // A wrapper put before every allot-agent's argv; it must exec the agent (keep its pid).
  virtual std::vector<std::string> agentWrapper() const { return {}; }
  // An agentWrapper() that runs the agent in a mount namespace of its own (private propagation,
  // so the host's mounts are never touched) once the shell commands `setup` have mounted what
  // the test needs; in them, "$0" is `arg0`.
  static std::vector<std::string> inOwnMountNamespace(const std::string& setup,
                                                      const std::string& arg0) {
    return {"/usr/bin/unshare", "--mount", "--propagation",           "private",
            "/bin/sh",          "-c",      setup + " && exec \"$@\"", arg0};
  }

  // allotd.
  void startServer();    // on port_ (0 the first time), data dir root_/data
  void killServer();     // SIGKILL, reaped
  void restartServer();  // kill -9, then start again on the same port and data dir
  // SIGTERM (allotd shuts down in order), then start again; SIGKILL if it takes over 30 s.
  void restartServerGracefully();
  // Whether the allotd this test started is still the one running (it has not died).
  bool serverRunning() { return server_ && server_->running(); }

  // Agents: each has its own work dir root_/agents/NAME. The first start joins with a join
  // token and waits until the host is online; later starts use the saved credential only.
  void startAgent(const std::string& name, const std::string& gpus = "sim:4xA100");
  void killAgent(const std::string& name);  // SIGKILL, reaped; its jobs keep running
  void restartAgent(const std::string& name);

  // The CLI, with --server and --token given and no config file; `token` "" means none.
  CliResult cliAs(const std::string& token, const std::vector<std::string>& args);
  // The same command left running (e.g. `job logs -f`); output in root_/cli/<name>.out|.err.
  std::unique_ptr<Process> spawnCliAs(const std::string& token,
                                      const std::vector<std::string>& args,
                                      const std::string& name);
  CliResult cli(const std::vector<std::string>& args) { return cliAs(adminToken_, args); }
  // Runs with `-o json`; throws unless it exits 0 with a JSON document on stdout.
  json cliJson(const std::string& token, const std::vector<std::string>& args);

  // Common steps, through the CLI.
  void createTeam(const std::string& team);
  // A user with `role` in `team`; its token.
  std::string createUser(const std::string& user, const std::string& team,
                         const std::string& role = "member");
  // The usual cast of a test of what one team may see or do of another's: teams `team1` and
  // `team2`, in that order, then member `user1` of the first and `user2` of the second; their
  // tokens, in that order.
  std::pair<std::string, std::string> createTwoTeams(const std::string& team1,
                                                     const std::string& user1,
                                                     const std::string& team2,
                                                     const std::string& user2);
  // `allot run -o json FLAGS -- COMMAND...`; returns the job id.
  int64_t submit(const std::string& token, const std::vector<std::string>& flags,
                 const std::vector<std::string>& command);
  // Runs `sh -c SCRIPT` as `token`'s user in a job (`flags` for `allot run`) and returns its
  // output once it has ended, whole.
  std::string runToEnd(const std::string& token, const std::string& script,
                       const std::vector<std::string>& flags = {});
  json job(const std::string& token, int64_t id);          // allot job show
  std::string logs(const std::string& token, int64_t id);  // allot job logs
  json host(const std::string& name);                      // allot host show (admin)
  // Waits until the job's state is `state`; returns the last job seen (for messages).
  bool waitForJobState(const std::string& token, int64_t id, const std::string& state,
                       json* last = nullptr, std::chrono::milliseconds timeout = kTimeout);
  bool waitForHostState(const std::string& name, const std::string& state);
  // The same for a session (`allot session show`); fails the test when it never gets there.
  bool waitForSessionState(const std::string& token, const std::string& id,
                           const std::string& state, json* last = nullptr,
                           std::chrono::milliseconds timeout = kTimeout);

  // The cgroup subtree of agent `name`: unique to this test's temp dir, so that test runs side by
  // side on one machine never touch each other's groups.
  std::string cgroupName(const std::string& name) const;

  // A path inside this test's temp dir.
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  std::string root_;
  std::string url_;
  uint16_t port_ = 0;
  std::string adminToken_;

 private:
  struct Agent {
    std::string workDir;
    std::string gpus;
    std::unique_ptr<Process> proc;
    int starts = 0;
  };
  void spawnAgent(const std::string& name, Agent& agent, bool join);
  std::string fetchJoinToken();
  void killStrayProcesses();
  void dumpLogs();

  std::unique_ptr<Process> server_;
  int serverStarts_ = 0;
  std::map<std::string, Agent> agents_;
  std::string joinToken_;
  int cliRuns_ = 0;
};

}  // namespace allot::it
