#include "cli/format.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <optional>

#include "cli/api_client.h"
#include "common/time_format.h"

namespace allot::cli {

std::string formatJobId(int64_t id) { return "j-" + std::to_string(id); }

Result<int64_t> parseJobId(std::string_view text) {
  std::string_view digits = text;
  if (digits.size() > 2 && (digits[0] == 'j' || digits[0] == 'J') && digits[1] == '-') {
    digits.remove_prefix(2);
  }
  int64_t id = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || id <= 0) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a job id (use e.g. 42 or j-42)");
  }
  return id;
}

Result<std::map<std::string, std::string>> parseEnvEntries(
    const std::vector<std::string>& entries) {
  std::map<std::string, std::string> env;
  for (const auto& e : entries) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--env '" + e + "': expected KEY=VALUE", "env");
    }
    env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  return env;
}

Result<int> parseCpuMillis(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("--cpus '" + std::string(text) +
                                   "': expected cores (2, 0.5) or millicores (250m)");
  };
  std::string num(text);
  bool millis = !num.empty() && num.back() == 'm';
  if (millis) num.pop_back();
  double value = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size() || value < 0) return bad();
  double result = millis ? value : value * 1000;
  if (result > 1e9) return bad();
  return static_cast<int>(result + 0.5);
}

Result<int64_t> parseMemoryMib(std::string_view text, std::string_view flag) {
  auto bad = [&] {
    return Status::InvalidArgument(std::string(flag) + " '" + std::string(text) +
                                   "': expected MiB (512) or a size like 512Mi, 16Gi, 1Ti");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  std::string num(text.substr(0, i));
  std::string_view unit = text.substr(i);
  double value = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size()) return bad();
  double mult = 0;
  if (unit.empty() || unit == "M" || unit == "Mi" || unit == "MiB")
    mult = 1;
  else if (unit == "G" || unit == "Gi" || unit == "GiB")
    mult = 1024;
  else if (unit == "T" || unit == "Ti" || unit == "TiB")
    mult = 1024 * 1024;
  else
    return bad();
  return static_cast<int64_t>(value * mult + 0.5);
}

namespace {

// A whole number >= 0 that fits an int, or nullopt.
std::optional<int> readCount(std::string_view text) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0)
    return std::nullopt;
  return v;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<GpuAmount> parseGpuAmount(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--gpus '" + std::string(text) + "': " + why);
  };
  auto dot = text.find('.');
  if (dot == std::string_view::npos) {
    auto n = readCount(text);
    if (!n) return bad("expected a number of GPUs (2) or a fraction of one (0.5)");
    return GpuAmount{*n, 1000};
  }
  auto whole = text.substr(0, dot);
  auto frac = text.substr(dot + 1);
  auto w = readCount(whole.empty() ? "0" : whole);
  if (!w || frac.empty() || frac.size() > 3 || !readCount(frac))
    return bad("expected a number of GPUs (2) or a fraction of one with at most 3 decimals (0.5)");
  std::string thousandths(frac);
  thousandths.resize(3, '0');
  int milli = *readCount(thousandths);
  if (milli == 0) return GpuAmount{*w, 1000};  // "2.0"
  if (*w != 0) return bad("a fraction must be below 1 GPU (0.5 is half of one shared GPU)");
  return GpuAmount{1, milli};
}

Result<std::map<std::string, int>> parseGpuCounts(const std::vector<std::string>& entries) {
  std::map<std::string, int> out;
  for (const auto& entry : entries) {
    for (const auto& item : splitList(entry)) {
      std::string_view view = item;
      auto eq = view.find('=');
      std::string_view model = eq == std::string_view::npos ? "" : trimmed(view.substr(0, eq));
      auto count =
          eq == std::string_view::npos ? std::nullopt : readCount(trimmed(view.substr(eq + 1)));
      if (model.empty() || !count)
        return Status::InvalidArgument("--gpus '" + item + "': expected MODEL=N, e.g. A100=4");
      out[std::string(model)] = *count;
    }
  }
  return out;
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    auto item = trimmed(text.substr(start, comma - start));
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

Result<int> parseLimit(std::string_view text, std::string_view flag) {
  if (text == "unlimited" || text == "none") return -1;  // "none": the older word, still taken
  auto n = readCount(text);
  if (!n)
    return Status::InvalidArgument(std::string(flag) + " '" + std::string(text) +
                                   "': expected a number of GPUs or 'unlimited'");
  return *n;
}

Result<std::string> windowQuery(const std::string& from, const std::string& to, TimeMs now) {
  std::string query;
  for (auto [key, value] : {std::pair{"from", &from}, {"to", &to}}) {
    if (value->empty()) continue;
    auto t = parseTime(*value, now);
    if (!t.ok()) return t.status().withContext(std::string("--") + key);
    query += std::string("&") + key + "=" + urlEncode(formatIso8601(*t));
  }
  return query;
}

std::string coarseDuration(TimeMs ms) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string relativeTime(std::string_view iso, TimeMs now) {
  if (iso.empty()) return "-";
  auto t = parseTime(iso, now);
  if (!t.ok()) return "-";
  TimeMs delta = now - *t;
  if (delta >= 0 && delta < 1000) return "just now";
  if (delta < 0) return "in " + coarseDuration(-delta);
  return coarseDuration(delta) + " ago";
}

std::string timeText(const json& obj, const char* key, TimeMs now) {
  std::string iso = text(obj, key, "");
  if (iso.empty()) return "-";
  return iso + " (" + relativeTime(iso, now) + ")";
}

std::string jobDuration(const json& job, TimeMs now) {
  std::string started = text(job, "started_at", "");
  if (started.empty()) return "-";
  auto start = parseTime(started, now);
  if (!start.ok()) return "-";
  TimeMs end = now;
  if (std::string finished = text(job, "finished_at", ""); !finished.empty()) {
    auto f = parseTime(finished, now);
    if (f.ok()) end = *f;
  }
  return formatDuration(end - *start);
}

std::string formatMib(int64_t mib) {
  if (mib < 1024) return std::to_string(mib) + " MiB";
  char buf[32];
  if (mib % 1024 == 0) {
    snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(mib / 1024));
  } else {
    snprintf(buf, sizeof buf, "%.1f GiB", mib / 1024.0);
  }
  return buf;
}

std::string formatBytes(int64_t bytes) {
  double b = static_cast<double>(bytes);
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, kUnits[u]);
  return buf;
}

std::string shellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                   "VWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string text(const json& obj, const char* key, const std::string& missing) {
  if (!obj.is_object()) return missing;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return missing;
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    return s.empty() ? missing : s;
  }
  if (it->is_boolean()) return it->get<bool>() ? "yes" : "no";
  return it->dump();
}

bool isTrue(const json& obj, const char* key) {
  if (!obj.is_object()) return false;
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

std::string jobIdText(const json& job) {
  auto it = job.find("id");
  if (it == job.end()) return "-";
  if (it->is_number_integer()) return formatJobId(it->get<int64_t>());
  std::string s = text(job, "id");
  auto id = parseJobId(s);
  return id.ok() ? formatJobId(*id) : s;
}

}  // namespace allot::cli
