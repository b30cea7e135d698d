#include "agent/gpu/simulated_gpu_provider.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

namespace allot::agent {
namespace {

constexpr char kPrefix[] = "sim:";
// More GPUs than any real host has: a typo like "sim:800xH100" is an error, not a giant host.
constexpr int kMaxGpus = 64;
// Shorthand topology (see the header): NVLink domains and PCIe switches, GPUs per each.
constexpr int kNvlinkDomainSize = 4;
constexpr int kGpusPerPcieSwitch = 2;

// One kind of GPU, before UUIDs and indices are handed out.
struct GpuTemplate {
  std::string model;
  int count = 1;
  int64_t memoryMib = 0;
  // From a file only; shorthand specs get the layout described in the header.
  int numaNode = -1;
  int nvlinkDomain = -1;
  int pcieSwitch = -1;
};

struct HostTemplate {
  std::vector<GpuTemplate> gpus;
  // A recent real pair, so that version minimums (min_driver, health checks) behave on simulated
  // hosts as on real ones; the host is labelled simulated by its provider, not by its versions.
  std::string driverVersion = "550.54.15";
  std::string cudaVersion = "12.4";
};

// FNV-1a: tiny, stable across compilers and runs (std::hash is neither promised).
uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

bool validModelName(const std::string& m) {
  if (m.empty()) return false;
  for (unsigned char c : m) {
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

Status badSpec(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("invalid simulated GPU spec '" + spec + "': " + why);
}

// "4xA100,2xH100" -> templates; create() lays out their topology.
Result<HostTemplate> parseTerms(const std::string& spec, const std::string& body) {
  HostTemplate host;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    std::string t = body.substr(pos, comma - pos);
    size_t x = t.find('x');
    if (x == std::string::npos || x == 0) {
      return badSpec(spec, "expected <count>x<model> terms separated by commas, e.g. sim:8xH100");
    }
    std::string countText = t.substr(0, x);
    std::string model = t.substr(x + 1);
    for (unsigned char c : countText) {
      if (!std::isdigit(c)) return badSpec(spec, "count '" + countText + "' is not a number");
    }
    if (countText.size() > 3) return badSpec(spec, "count '" + countText + "' is too large");
    int count = std::stoi(countText);
    if (count < 1) return badSpec(spec, "count must be at least 1");
    if (!validModelName(model))
      return badSpec(spec, "model '" + model + "' is not a GPU model name");
    GpuTemplate g;
    g.model = model;
    g.count = count;
    g.memoryMib = SimulatedGpuProvider::defaultMemoryMib(model);
    host.gpus.push_back(g);
    pos = comma + 1;
  }
  return host;
}

Result<HostTemplate> parseFile(const std::string& spec, const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::string where;
    if (e.source().begin) where = " at line " + std::to_string(e.source().begin.line);
    return badSpec(spec,
                   "cannot parse '" + path + "'" + where + ": " + std::string(e.description()));
  }
  HostTemplate host;
  host.driverVersion = doc["driver_version"].value_or(host.driverVersion);
  host.cudaVersion = doc["cuda_version"].value_or(host.cudaVersion);
  const toml::array* gpus = doc["gpu"].as_array();
  if (gpus == nullptr || gpus->empty()) {
    return badSpec(spec, "'" + path + "' has no [[gpu]] entries");
  }
  int n = 0;
  for (const toml::node& node : *gpus) {
    const toml::table* t = node.as_table();
    std::string entry = "[[gpu]] entry " + std::to_string(n++);
    if (t == nullptr) return badSpec(spec, entry + " is not a table");
    GpuTemplate g;
    g.model = (*t)["model"].value_or(std::string());
    if (!validModelName(g.model)) {
      return badSpec(spec, entry + " needs model = \"<short name>\", e.g. \"H100\"");
    }
    int64_t count = (*t)["count"].value_or(int64_t{1});
    if (count < 1 || count > kMaxGpus) return badSpec(spec, entry + " has a bad count");
    g.count = static_cast<int>(count);
    g.memoryMib = (*t)["memory_mib"].value_or(SimulatedGpuProvider::defaultMemoryMib(g.model));
    if (g.memoryMib <= 0) return badSpec(spec, entry + " has a bad memory_mib");
    g.numaNode = static_cast<int>((*t)["numa_node"].value_or(int64_t{-1}));
    g.nvlinkDomain = static_cast<int>((*t)["nvlink_group"].value_or(int64_t{-1}));
    g.pcieSwitch = static_cast<int>((*t)["pcie_switch"].value_or(int64_t{-1}));
    host.gpus.push_back(g);
  }
  return host;
}

// Shorthand topology: a term of `count` GPUs split into runs of `size`; how many runs have two or
// more GPUs, and which of them GPU `i` of the term is in (-1 when its run is just itself).
int groupsIn(int count, int size) { return count / size + (count % size >= 2 ? 1 : 0); }
int groupOf(int i, int count, int size, int first) {
  int runStart = i - i % size;
  return std::min(size, count - runStart) >= 2 ? first + i / size : -1;
}

bool looksLikePath(const std::string& body) {
  return !body.empty() && (body[0] == '/' || body[0] == '.' ||
                           (body.size() > 5 && body.compare(body.size() - 5, 5, ".toml") == 0));
}

}  // namespace

int64_t SimulatedGpuProvider::defaultMemoryMib(const std::string& model) {
  static const std::map<std::string, int64_t> kKnown = {
      {"A100", 81920}, {"H100", 81920}, {"H200", 143771},
      {"V100", 32768}, {"L4", 23034},   {"T4", 15360},
  };
  std::string upper;
  for (unsigned char c : model) upper.push_back(static_cast<char>(std::toupper(c)));
  auto it = kKnown.find(upper);
  return it == kKnown.end() ? 16384 : it->second;
}

Result<std::unique_ptr<SimulatedGpuProvider>> SimulatedGpuProvider::create(
    const std::string& spec, const std::string& hostSeed) {
  if (spec.rfind(kPrefix, 0) != 0) return badSpec(spec, "must start with 'sim:'");
  std::string body = spec.substr(sizeof(kPrefix) - 1);
  if (body.empty()) return badSpec(spec, "nothing after 'sim:'; try sim:8xH100");

  Result<HostTemplate> host = looksLikePath(body) ? parseFile(spec, body) : parseTerms(spec, body);
  if (!host.ok()) return host.status();

  int total = 0;
  for (const auto& g : host->gpus) total += g.count;
  if (total > kMaxGpus) {
    return badSpec(spec, std::to_string(total) + " GPUs is more than the " +
                             std::to_string(kMaxGpus) + " a host may have");
  }
  const bool fromFile = looksLikePath(body);

  char seed[9];
  std::snprintf(seed, sizeof seed, "%08x", fnv1a(hostSeed));
  std::unique_ptr<SimulatedGpuProvider> p(new SimulatedGpuProvider());
  p->driverVersion_ = host->driverVersion;
  int index = 0;
  int nextDomain = 0, nextSwitch = 0;
  for (const auto& t : host->gpus) {
    for (int i = 0; i < t.count; ++i, ++index) {
      model::Gpu g;
      g.index = index;
      g.minor = index;
      g.uuid = "GPU-sim-" + std::string(seed) + "-" + std::to_string(index);
      g.model = t.model;
      g.memoryMib = t.memoryMib;
      g.driverVersion = host->driverVersion;
      g.cudaVersion = host->cudaVersion;
      if (fromFile) {
        g.numaNode = t.numaNode;
        g.nvlinkDomain = t.nvlinkDomain;
        g.pcieSwitch = t.pcieSwitch;
      } else {
        // Two sockets: the first half of the GPUs on node 0.
        g.numaNode = total >= 2 ? index * 2 / total : 0;
        // Runs within the term; a GPU left alone in its run shares nothing, so has -1.
        g.nvlinkDomain = groupOf(i, t.count, kNvlinkDomainSize, nextDomain);
        g.pcieSwitch = groupOf(i, t.count, kGpusPerPcieSwitch, nextSwitch);
      }
      p->gpus_.push_back(g);
    }
    // The next term starts on fresh domains and switches.
    nextDomain += groupsIn(t.count, kNvlinkDomainSize);
    nextSwitch += groupsIn(t.count, kGpusPerPcieSwitch);
  }
  return p;
}

// A workload's declared utilisation now: its util file when that holds a number, else what it
// declared at start. Out-of-range numbers are clamped to 0..100.
static double declaredUtil(const GpuProvider::Workload& w) {
  double pct = w.declaredUtilPct;
  if (!w.utilFile.empty()) {
    std::ifstream in(w.utilFile);
    double fromFile = 0;
    if (in >> fromFile) pct = fromFile;
  }
  return std::clamp(pct, 0.0, 100.0);
}

Result<std::vector<model::GpuSample>> SimulatedGpuProvider::sample() {
  std::map<int, double> util;
  for (const auto& w : workloads_) {
    const double pct = declaredUtil(w);
    for (int g : w.gpuIndices) util[g] += pct;
  }
  std::vector<model::GpuSample> out;
  out.reserve(gpus_.size());
  for (const auto& g : gpus_) {
    model::GpuSample s;
    s.index = g.index;
    const double u = std::min(100.0, util.count(g.index) ? util[g.index] : 0.0);
    s.utilizationPct = u;
    s.memoryUsedMib = static_cast<int64_t>(static_cast<double>(g.memoryMib) * u / 100);
    s.temperatureC = 30 + 0.5 * u;
    s.powerW = 60 + 6 * u;
    s.smClockMhz = u > 0 ? 1980 : 210;
    s.eccCorrected = 0;
    s.eccUncorrected = 0;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace allot::agent
