#include "sim/trace.h"

#include <charconv>
#include <fstream>
#include <map>

namespace allot::sim {
namespace {

namespace pl = sched::placement;

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = line.find(sep, start);
    out.push_back(line.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// Reads a CSV with a header; calls row(fields, where) for each non-empty line.
class CsvReader {
 public:
  static Result<CsvReader> open(const std::string& path, const std::vector<std::string>& need) {
    CsvReader r;
    r.path_ = path;
    r.in_.open(path);
    if (!r.in_) return Status::NotFound("cannot open '" + path + "'");
    std::string header;
    if (!std::getline(r.in_, header)) return Status::InvalidArgument(path + ":1: empty file");
    if (!header.empty() && header.back() == '\r') header.pop_back();
    auto names = split(header, ',');
    for (size_t i = 0; i < names.size(); ++i) r.columns_[names[i]] = i;
    for (const auto& n : need) {
      if (!r.columns_.count(n)) {
        return Status::InvalidArgument(path + ":1: missing column '" + n + "'");
      }
    }
    r.line_ = 1;
    return r;
  }
  bool next() {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      fields_ = split(line, ',');
      return true;
    }
    return false;
  }
  bool has(const std::string& column) const { return columns_.count(column) > 0; }
  std::string where() const { return path_ + ":" + std::to_string(line_); }
  Result<std::string> text(const std::string& column) const {
    size_t i = columns_.at(column);
    if (i >= fields_.size()) return Status::InvalidArgument(where() + ": missing " + column);
    return fields_[i];
  }
  // A number, or `absent` when the column is missing or the field empty.
  Result<int64_t> optionalNumber(const std::string& column, int64_t min, int64_t max,
                                 int64_t absent) const {
    if (!has(column)) return absent;
    auto t = text(column);
    if (!t.ok()) return t.status();
    if (t->empty()) return absent;
    return number(column, min, max);
  }
  Result<int64_t> number(const std::string& column, int64_t min, int64_t max) const {
    auto t = text(column);
    if (!t.ok()) return t.status();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
    if (ec != std::errc() || p != t->data() + t->size() || v < min || v > max) {
      return Status::InvalidArgument(where() + ": bad " + column + " '" + *t + "' (want " +
                                     std::to_string(min) + ".." + std::to_string(max) + ")");
    }
    return v;
  }

 private:
  CsvReader() = default;
  std::string path_;
  std::ifstream in_;
  std::map<std::string, size_t> columns_;
  std::vector<std::string> fields_;
  int line_ = 0;
};

constexpr int64_t kBig = int64_t{1} << 40;

}  // namespace

Result<std::vector<pl::NodeSpec>> loadNodes(const std::string& path) {
  auto r = CsvReader::open(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!r.ok()) return r.status();
  std::vector<pl::NodeSpec> nodes;
  while (r->next()) {
    pl::NodeSpec n;
    auto name = r->text("sn");
    auto cpu = r->number("cpu_milli", 0, kBig);
    auto mem = r->number("memory_mib", 0, kBig);
    auto gpu = r->number("gpu", 0, pl::kMaxGpusPerNode);
    auto model = r->text("model");
    for (const Status* s :
         {&name.status(), &cpu.status(), &mem.status(), &gpu.status(), &model.status()}) {
      if (!s->ok()) return *s;
    }
    nodes.push_back({*name, *cpu, *mem, static_cast<int>(*gpu), *model});
  }
  return nodes;
}

Result<std::vector<TraceTask>> loadTasks(const std::string& path) {
  auto r = CsvReader::open(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!r.ok()) return r.status();
  const bool hasSpec = r->has("gpu_spec");  // absent in some variants: any model
  std::vector<TraceTask> tasks;
  while (r->next()) {
    auto name = r->text("name");
    auto cpu = r->number("cpu_milli", 0, kBig);
    auto mem = r->number("memory_mib", 0, kBig);
    auto num = r->number("num_gpu", 0, pl::kMaxGpusPerNode);
    auto milli = r->number("gpu_milli", 0, pl::kGpuMilli);
    Result<std::string> spec = hasSpec ? r->text("gpu_spec") : Result<std::string>(std::string());
    for (const Status* s : {&name.status(), &cpu.status(), &mem.status(), &num.status(),
                            &milli.status(), &spec.status()}) {
      if (!s->ok()) return *s;
    }
    if (*num > 1 && *milli != pl::kGpuMilli && *milli != 0) {
      return Status::InvalidArgument(r->where() + ": gpu_milli " + std::to_string(*milli) +
                                     " with num_gpu " + std::to_string(*num) +
                                     " (sharing is for one GPU only)");
    }
    TraceTask t;
    t.name = *name;
    t.task.cpuMilli = *cpu;
    t.task.memoryMib = *mem;
    t.task.numGpu = static_cast<int>(*num);
    t.task.gpuMilli = *num == 0 ? 0 : (*milli == 0 ? pl::kGpuMilli : static_cast<int>(*milli));
    if (!spec->empty()) t.gpuSpec = split(*spec, '|');
    auto created = r->optionalNumber("creation_time", 0, kBig, -1);
    auto deleted = r->optionalNumber("deletion_time", 0, kBig, -1);
    auto scheduled = r->optionalNumber("scheduled_time", 0, kBig, -1);
    auto qos = r->has("qos") ? r->text("qos") : Result<std::string>(std::string());
    for (const Status* s :
         {&created.status(), &deleted.status(), &scheduled.status(), &qos.status()}) {
      if (!s->ok()) return *s;
    }
    t.creationTime = *created;
    t.deletionTime = *deleted;
    t.scheduledTime = *scheduled;
    t.qos = *qos;
    tasks.push_back(std::move(t));
  }
  return tasks;
}

std::vector<pl::Task> resolveTasks(const pl::ClusterState& cluster,
                                   const std::vector<TraceTask>& tasks) {
  std::vector<pl::Task> out;
  out.reserve(tasks.size());
  for (const auto& t : tasks) {
    pl::Task task = t.task;
    task.allowedModels = cluster.modelMask(t.gpuSpec);
    out.push_back(task);
  }
  return out;
}

}  // namespace allot::sim
