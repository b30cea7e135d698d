#include "api/metrics.h"

#include <spdlog/spdlog.h>

#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

namespace allot::api {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  // The shortest form that reads back exactly; plain decimals where they stay short.
  const double a = std::fabs(v);
  const auto format =
      a != 0 && (a < 1e-4 || a >= 1e15) ? std::chars_format::general : std::chars_format::fixed;
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, format);
  return std::string(buf, end);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// name{labels} value
void sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name;
  if (!labels.empty()) out += '{' + labels + '}';
  out += ' ';
  out += number(value);
  out += '\n';
}

std::string label(const char* key, const std::string& value) {
  return std::string(key) + "=\"" + escapeLabel(value) + '"';
}

std::vector<double> latencyBounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

// One label set per GPU with current telemetry: its identity and, while allocated, its holders.
// A GPU shared by fractions of several jobs names them all, comma-separated in job order, so
// each GPU stays one series.
std::vector<std::pair<std::string, const control::GpuTelemetry*>> telemetrySeries(
    const control::World& w, TimeMs now) {
  std::vector<std::pair<std::string, const control::GpuTelemetry*>> out;
  for (const auto& [hostName, h] : w.hosts) {
    const auto holders = w.gpuHolders().find(hostName);
    for (const auto& g : h.gpus) {
      const auto* t = w.freshTelemetry(hostName, g.index, now);
      if (!t) continue;
      std::string labels = label("host", hostName) + "," + label("gpu", std::to_string(g.index)) +
                           "," + label("uuid", g.uuid) + "," + label("model", g.model);
      std::string team, project, user;
      bool held = false;
      if (holders != w.gpuHolders().end()) {
        auto [from, to] = holders->second.equal_range(g.index);
        for (auto it = from; it != to; ++it) {
          const model::Job* job = w.findJob(it->second);
          if (job == nullptr) continue;
          const char* sep = held ? "," : "";
          team += sep + job->team;
          project += sep + job->project;
          user += sep + job->user;
          held = true;
        }
      }
      if (held) {
        labels +=
            "," + label("team", team) + "," + label("project", project) + "," + label("user", user);
      }
      out.emplace_back(std::move(labels), t);
    }
  }
  return out;
}

void renderTelemetry(std::string& out, const control::World& w, TimeMs now) {
  const auto series = telemetrySeries(w, now);
  // One family per reading; a GPU whose driver does not give a reading has no series in it.
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    for (const auto& [labels, t] : series) {
      if (auto v = value(t->sample)) sample(out, name, labels, *v);
    }
  };
  using Sample = model::GpuSample;
  using Opt = std::optional<double>;
  family("allot_gpu_utilization_ratio", "gauge",
         "Share of time the GPU ran a kernel over the driver's last sample period (0..1).",
         [](const Sample& s) { return s.utilizationPct ? Opt(*s.utilizationPct / 100) : Opt(); });
  family("allot_gpu_memory_used_bytes", "gauge", "GPU memory in use.", [](const Sample& s) {
    return s.memoryUsedMib ? Opt(static_cast<double>(*s.memoryUsedMib) * 1024 * 1024) : Opt();
  });
  family("allot_gpu_temperature_celsius", "gauge", "GPU core temperature.",
         [](const Sample& s) { return s.temperatureC ? Opt(*s.temperatureC) : Opt(); });
  family("allot_gpu_power_watts", "gauge", "GPU power draw.",
         [](const Sample& s) { return s.powerW ? Opt(*s.powerW) : Opt(); });
  family("allot_gpu_sm_clock_hertz", "gauge", "GPU SM clock.", [](const Sample& s) {
    return s.smClockMhz ? Opt(static_cast<double>(*s.smClockMhz) * 1e6) : Opt();
  });
  header(out, "allot_gpu_ecc_errors_total", "counter",
         "Memory ECC errors over the GPU's lifetime (NVML aggregate counts), by kind.");
  for (const auto& [labels, t] : series) {
    for (auto [kind, value] : {std::pair{"corrected", t->sample.eccCorrected},
                               {"uncorrected", t->sample.eccUncorrected}}) {
      if (value) {
        sample(out, "allot_gpu_ecc_errors_total", labels + "," + label("kind", kind),
               static_cast<double>(*value));
      }
    }
  }
}

}  // namespace

std::string escapeLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    sample(out, name + "_bucket", prefix + "le=\"" + number(le) + '"',
           static_cast<double>(cumulative));
  }
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, static_cast<double>(count_));
}

ServerMetrics::ServerMetrics() : passSeconds(latencyBounds()), passIoSeconds(latencyBounds()) {}

// A request's method as a label: the standard ones by name, anything else one "OTHER". HTTP
// lets a method be any token, and a label per token sent would let any client, unauthenticated,
// grow allotd's memory and /metrics without end.
static const std::string& methodLabel(const std::string& method) {
  static const std::array<std::string, 9> kKnown = {"GET",    "HEAD",    "POST",    "PUT",  "PATCH",
                                                    "DELETE", "OPTIONS", "CONNECT", "TRACE"};
  static const std::string kOther = "OTHER";
  for (const auto& known : kKnown)
    if (method == known) return known;
  return kOther;
}

void ServerMetrics::request(const std::string& route, const std::string& method, int status,
                            double seconds) {
  ++requests[{route, methodLabel(method), status}];
  requestSeconds.try_emplace(route, latencyBounds()).first->second.observe(seconds);
}

void ServerMetrics::schedulingPass(double seconds, double ioSeconds, size_t placed) {
  passSeconds.observe(seconds);
  passIoSeconds.observe(ioSeconds);
  ++passes;
  placements += placed;
}

void ServerMetrics::agentReport(const std::string& host, int64_t refusedDesired) {
  int64_t& seen = desiredRefused[host];
  if (refusedDesired > seen)
    spdlog::error(
        "agent {} refused {} desired state(s) it could not decode (allotd and the agent may be of "
        "different versions); it keeps running what it runs and waits for one it can read",
        host, refusedDesired - seen);
  seen = refusedDesired;
}

std::string renderMetrics(const control::World& w, const ServerMetrics& m, TimeMs now) {
  std::string out;
  out.reserve(4096 + 256 * w.hosts.size());

  header(out, "allot_hosts", "gauge", "Hosts by state.");
  int online = 0;
  for (const auto& [name, h] : w.hosts) online += h.state == model::HostState::kOnline;
  sample(out, "allot_hosts", label("state", "online"), online);
  sample(out, "allot_hosts", label("state", "unreachable"),
         static_cast<double>(w.hosts.size()) - online);

  // Every admin state, zeros included, so a dashboard's series exist before the first drain.
  header(out, "allot_hosts_admin", "gauge", "Hosts by admin state (docs/hosts.md).");
  std::map<model::AdminState, int> byAdmin;
  for (const auto& [name, h] : w.hosts) ++byAdmin[h.adminState];
  for (auto a : {model::AdminState::kAvailable, model::AdminState::kDraining,
                 model::AdminState::kMaintenance, model::AdminState::kFailed,
                 model::AdminState::kRetired, model::AdminState::kReprovisioning}) {
    sample(out, "allot_hosts_admin", label("admin_state", model::adminStateName(a)), byAdmin[a]);
  }

  header(out, "allot_host_up", "gauge",
         "1 while the host's agent is connected and heartbeating, else 0.");
  for (const auto& [name, h] : w.hosts) {
    sample(out, "allot_host_up",
           label("host", name) + "," + label("simulated", h.simulated ? "true" : "false"),
           h.state == model::HostState::kOnline ? 1 : 0);
  }

  header(out, "allot_gpu_info", "gauge",
         "One per GPU of the fleet, with its model, mode and dedication as labels.");
  for (const auto& [name, h] : w.hosts) {
    for (const auto& g : h.gpus) {
      const std::string owner = h.dedicatedTo.empty() ? g.dedicatedTo : h.dedicatedTo;
      sample(out, "allot_gpu_info",
             label("host", name) + "," + label("gpu", std::to_string(g.index)) + "," +
                 label("uuid", g.uuid) + "," + label("model", g.model) + "," +
                 label("shared", g.shared ? "true" : "false") + "," + label("dedicated_to", owner),
             1);
    }
  }

  header(out, "allot_gpu_allocated", "gauge",
         "Share of a GPU held by a job (1 = the whole GPU), labelled with who holds it.");
  for (const auto& [hostName, holders] : w.gpuHolders()) {
    const auto host = w.hosts.find(hostName);
    if (host == w.hosts.end()) continue;
    for (const auto& [gpu, jobId] : holders) {
      const model::Job* job = w.findJob(jobId);
      if (job == nullptr) continue;
      const model::Job& j = *job;
      std::string uuid, gpuModel;
      for (const auto& g : host->second.gpus) {
        if (g.index == gpu) {
          uuid = g.uuid;
          gpuModel = g.model;
        }
      }
      sample(out, "allot_gpu_allocated",
             label("host", hostName) + "," + label("gpu", std::to_string(gpu)) + "," +
                 label("uuid", uuid) + "," + label("model", gpuModel) + "," +
                 label("team", j.team) + "," + label("project", j.project) + "," +
                 label("user", j.user) + "," + label("job", std::to_string(j.id)),
             j.resources.gpuMilli / 1000.0);
    }
  }

  renderTelemetry(out, w, now);

  // Jobs: how many are in each state now, and how many ever ended in each (jobs are kept).
  // Counted as jobs change (World::jobsByState): a scrape never walks every job ever kept.
  std::map<model::JobState, int64_t> byState = w.jobsByState();
  const int64_t preemptions = w.preemptions();
  static const model::JobState kStates[] = {
      model::JobState::kQueued,    model::JobState::kScheduled, model::JobState::kPulling,
      model::JobState::kRunning,   model::JobState::kSucceeded, model::JobState::kFailed,
      model::JobState::kCancelled, model::JobState::kLost,      model::JobState::kPreempted};
  header(out, "allot_jobs", "gauge", "Jobs in each state that is not final, now.");
  for (auto st : kStates) {
    if (model::isTerminal(st)) continue;
    sample(out, "allot_jobs", label("state", model::jobStateName(st)), byState[st]);
  }
  header(out, "allot_jobs_submitted_total", "counter", "Jobs ever submitted.");
  sample(out, "allot_jobs_submitted_total", "", static_cast<double>(w.nextJobId - 1));
  header(out, "allot_jobs_ended_total", "counter", "Jobs that ended, by how they ended.");
  for (auto st : kStates) {
    if (!model::isTerminal(st)) continue;
    sample(out, "allot_jobs_ended_total", label("state", model::jobStateName(st)), byState[st]);
  }
  header(out, "allot_preemptions_total", "counter",
         "Times a job was preempted (requeued or stopped) to give GPUs back to a guarantee.");
  sample(out, "allot_preemptions_total", "", static_cast<double>(preemptions));

  header(out, "allot_team_gpus", "gauge",
         "A team's quota position from the last scheduling pass, in GPUs.");
  for (const auto& [team, st] : w.quotaStatus) {
    if (!st.known) continue;
    for (auto [kind, value] : {std::pair{"guaranteed", st.guaranteed},
                               {"within", st.within},
                               {"borrowed", st.borrowed},
                               {"lendable", st.lendable}}) {
      sample(out, "allot_team_gpus", label("team", team) + "," + label("kind", kind), value);
    }
  }

  header(out, "allot_scheduling_pass_duration_seconds", "histogram",
         "Time one scheduling pass took (snapshot, decisions, applying them in memory).");
  m.passSeconds.render(out, "allot_scheduling_pass_duration_seconds", "");
  header(out, "allot_scheduling_pass_io_thread_seconds", "histogram",
         "Of each scheduling pass, the time on allotd's I/O thread, where requests wait for it "
         "(taking the snapshot, applying the decisions); the decision runs on a thread of its "
         "own.");
  m.passIoSeconds.render(out, "allot_scheduling_pass_io_thread_seconds", "");
  header(out, "allot_connections_refused_total", "counter",
         "Connections closed as soon as accepted: allotd held its limit of connections, in all or "
         "from that client.");
  sample(out, "allot_connections_refused_total", "", static_cast<double>(m.connectionsRefused));
  header(out, "allot_idle_connections_closed_total", "counter",
         "Connections that waited for a request, closed to make room for a new one when allotd "
         "held its limit of connections.");
  sample(out, "allot_idle_connections_closed_total", "",
         static_cast<double>(m.idleConnectionsClosed));
  header(out, "allot_scheduling_passes_total", "counter", "Scheduling passes run.");
  sample(out, "allot_scheduling_passes_total", "", static_cast<double>(m.passes));
  header(out, "allot_scheduling_refused_passes_total", "counter",
         "Scheduling passes that refused the fleet's snapshot and placed nothing (the "
         "scheduler_error event says why).");
  sample(out, "allot_scheduling_refused_passes_total", "", static_cast<double>(w.refusedPasses));
  header(out, "allot_agent_desired_refused_total", "counter",
         "Desired states an agent refused whole because it could not decode them (version skew), "
         "as the agent last reported; it restarts from 0 with the agent.");
  for (const auto& [host, n] : m.desiredRefused)
    sample(out, "allot_agent_desired_refused_total", label("host", host), static_cast<double>(n));
  header(out, "allot_placements_total", "counter", "Jobs placed by the scheduler.");
  sample(out, "allot_placements_total", "", static_cast<double>(m.placements));

  header(out, "allot_telemetry_samples_total", "counter",
         "GPU samples taken in from agents (one per GPU per telemetry round).");
  sample(out, "allot_telemetry_samples_total", "", static_cast<double>(m.telemetrySamples));
  header(out, "allot_telemetry_rejected_samples_total", "counter",
         "GPU samples in telemetry rounds rejected (another host named, unknown GPU, malformed).");
  sample(out, "allot_telemetry_rejected_samples_total", "",
         static_cast<double>(m.telemetryRejected));

  header(out, "allot_api_requests_total", "counter",
         "API requests by route pattern, method and status code.");
  for (const auto& [key, n] : m.requests) {
    const auto& [route, method, status] = key;
    sample(out, "allot_api_requests_total",
           label("route", route) + "," + label("method", method) + "," +
               label("code", std::to_string(status)),
           static_cast<double>(n));
  }
  header(out, "allot_api_request_duration_seconds", "histogram",
         "Time from a request read to its reply written, by route pattern.");
  for (const auto& [route, h] : m.requestSeconds) {
    h.render(out, "allot_api_request_duration_seconds", label("route", route));
  }
  return out;
}

}  // namespace allot::api
