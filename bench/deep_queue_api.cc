// The API while scheduling passes walk a deep queue: --hosts fake hosts of 8 simulated GPUs
// (bench/fake_fleet.h: they join through the API and hold agent streams open, no agent
// processes), every GPU held by a one-GPU job, then --queued more one-GPU jobs that cannot start.
// Each pass then answers every queued job with its reason. While a submitter keeps waking passes
// (a job every --submit-every-ms), a prober times requests one after another on fresh
// connections, as the CLI makes them: GET a queued job, GET /api/v1/whoami, and POST a job (a
// durable write). Prints p50/p99/max of each and the passes' count and mean duration from
// allotd's metrics. Only 127.0.0.1 is contacted.
//
//   build/bin/deep_queue_api --hosts 10000 --queued 100000 --seconds 30
//
// The jobs are submitted as arrays of up to 1,000 tasks (each task is a job of its own in the
// queue), so setting up 180,000 jobs takes seconds. The fake hosts never start their jobs, so
// those stay `scheduled` and hold their GPUs. allotd runs with a heartbeat of 10 minutes, as the
// fake hosts send none, and with the per-user and per-team active-job limits off.

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.h"
#include "fake_fleet.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using allot::bench::metricValue;
using allot::bench::percentile;

int fail(const std::string& msg) {
  std::cerr << "deep_queue_api: " << msg << "\n";
  return 1;
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The sum and count of allotd's pass-duration histogram.
std::pair<double, double> passTotals(uint16_t port, const std::string& token) {
  return {metricValue(port, token, "allot_scheduling_pass_duration_seconds_sum"),
          metricValue(port, token, "allot_scheduling_pass_duration_seconds_count")};
}

void report(const char* what, std::vector<double>& ms) {
  const size_t n = ms.size();
  const double p50 = percentile(ms, 50), p99 = percentile(ms, 99), max = percentile(ms, 100);
  std::printf("%-28s n=%5zu  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", what, n, p50, p99, max);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"API latency while scheduling passes walk a deep queue"};
  int hosts = 10000, queued = 100000, seconds = 30, submitEveryMs = 100;
  std::string bin = allot::bench::selfDir();
  app.add_option("--hosts", hosts, "fake hosts of 8 simulated GPUs (default 10000)");
  app.add_option("--queued", queued, "jobs queued behind the full fleet (default 100000)");
  app.add_option("--seconds", seconds, "how long the prober runs (default 30)");
  app.add_option("--submit-every-ms", submitEveryMs, "a new job this often (default 100)");
  app.add_option("--bin", bin, "where allotd is (default: next to this binary)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines as they come

  std::printf("%s\n", allot::bench::machineLine().c_str());
  auto dir = allot::bench::makeScratchDir("allot-deep-queue");
  if (!dir.ok()) return fail(dir.status().toString());
  std::vector<std::string> extra =
      allot::bench::fakeFleetAllotdArgs(*dir, allot::bench::kNoActiveJobLimits);
  {
    std::ofstream config(extra.back(), std::ios::app);
    config << "[agents]\nheartbeat = \"10m\"\n";
  }
  auto d = allot::bench::startAllotd(bin + "/allotd", *dir + "/data", extra);
  if (!d.ok()) return fail(d.status().toString());
  const std::string admin = d->adminToken;
  auto call = [&](const std::string& method, const std::string& target, const json& body,
                  const std::string& token) {
    return allot::bench::callOrExit(d->port, method, target, body, token);
  };

  auto started = Clock::now();
  auto fleet = allot::bench::FakeFleet::join(d->port, admin, hosts, 8, "gpu");
  if (!fleet.ok()) return fail(fleet.status().toString());
  std::printf("%d hosts joined in %.1f s\n", hosts, msSince(started) / 1000);

  std::vector<std::string> tokens;
  for (int t = 0; t < 4; ++t) {
    const std::string team = "team-" + std::string(1, static_cast<char>('a' + t));
    call("POST", "/api/v1/teams", {{"name", team}}, admin);
    tokens.push_back(
        call("POST", "/api/v1/users", {{"name", "user-" + team}, {"team", team}}, admin)
            .at("token"));
  }
  // Enough one-GPU jobs to fill every GPU, then the deep queue, as arrays of 1,000 tasks.
  started = Clock::now();
  const int total = hosts * 8 + queued;
  for (int submitted = 0, a = 0; submitted < total; ++a) {
    const int tasks = std::min(1000, total - submitted);
    call("POST", "/api/v1/jobs",
         {{"command", {"sleep", "3600"}}, {"gpus", 1}, {"array", "0-" + std::to_string(tasks - 1)}},
         tokens[a % tokens.size()]);
    submitted += tasks;
  }
  std::printf("%d jobs submitted in %.1f s\n", total, msSince(started) / 1000);
  // Until the fleet is full: the passes that place the first jobs are not what is measured.
  // (A pass may keep a few GPUs free as reservations for the head of the queue, and then no
  // pass runs until something changes: filled means that the count stopped growing for 9 s.)
  for (double last = -1, same = 0;;) {
    const double now = metricValue(d->port, admin, "allot_jobs{state=\"scheduled\"}");
    same = now == last ? same + 1 : 0;
    last = now;
    if (now >= hosts * 8 || (now > 0 && same >= 3)) break;
    if (msSince(started) > 600'000) return fail("the fleet did not fill in 10 minutes");
    // Seldom: rendering /metrics for 80,000 GPUs is itself a second of allotd's I/O thread.
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  std::printf("fleet full: %.0f jobs placed, %.0f queued, after %.1f s\n",
              metricValue(d->port, admin, "allot_jobs{state=\"scheduled\"}"),
              metricValue(d->port, admin, "allot_jobs{state=\"queued\"}"), msSince(started) / 1000);
  const int64_t probeJob = call("GET", "/api/v1/jobs?state=queued&limit=1", nullptr, admin)
                               .at(0)
                               .at("id")
                               .get<int64_t>();

  const auto [sum0, count0] = passTotals(d->port, admin);
  std::atomic<bool> done{false};
  std::thread submitter([&] {
    while (!done) {
      // Its reply does not matter: the submitter only wakes passes.
      (void)allot::bench::httpRequest(d->port, "POST", "/api/v1/jobs", tokens[0],
                                      R"({"command":["true"],"gpus":1})");
      std::this_thread::sleep_for(std::chrono::milliseconds(submitEveryMs));
    }
  });
  std::vector<double> getJob, whoami, post;
  const std::string jobTarget = "/api/v1/jobs/" + std::to_string(probeJob);
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  int errors = 0;
  std::string lastError;
  auto check = [&](const allot::Result<allot::bench::HttpReply>& r, int want) {
    if (r.ok() && r->status == want) return;
    ++errors;
    lastError = r.ok() ? std::to_string(r->status) + " " + r->body : r.status().toString();
  };
  while (Clock::now() < end) {
    auto t = Clock::now();
    auto r = allot::bench::httpRequest(d->port, "GET", jobTarget, admin, "");
    check(r, 200);
    getJob.push_back(msSince(t));
    t = Clock::now();
    r = allot::bench::httpRequest(d->port, "GET", "/api/v1/whoami", tokens[1], "");
    check(r, 200);
    whoami.push_back(msSince(t));
    t = Clock::now();
    r = allot::bench::httpRequest(d->port, "POST", "/api/v1/jobs", tokens[2],
                                  R"({"command":["true"],"gpus":1})");
    check(r, 201);
    post.push_back(msSince(t));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done = true;
  submitter.join();
  const auto [sum1, count1] = passTotals(d->port, admin);

  std::printf("while passes ran (%d s, load %.2f):\n", seconds, allot::bench::loadAverage1());
  report("GET /api/v1/jobs/ID", getJob);
  report("GET /api/v1/whoami", whoami);
  report("POST /api/v1/jobs (durable)", post);
  const double passes = count1 - count0;
  std::printf("passes: %.0f, mean %.1f ms; failed requests: %d\n", passes,
              passes > 0 ? (sum1 - sum0) / passes * 1000 : 0.0, errors);
  if (errors > 0) std::printf("last failure: %s\n", lastError.c_str());
  std::printf("allotd VmHWM %.0f MiB\n",
              allot::bench::procStatusKib(d->process.pid(), "VmHWM") / 1024.0);
  fleet->reset();
  d->process.stop();
  allot::bench::removeTree(*dir);
  return errors == 0 ? 0 : 1;
}
