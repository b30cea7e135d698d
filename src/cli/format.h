#pragma once
// Text forms for the CLI's human output and its arguments: job ids, times relative to now, sizes,
// command lines, and reading loosely-typed API JSON. Pure functions; `now` is an input.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/json.h"
#include "common/clock.h"
#include "common/status.h"

namespace allot::cli {

// "j-42".
std::string formatJobId(int64_t id);
// Accepts "42" and "j-42"; anything else is an InvalidArgument naming the text.
Result<int64_t> parseJobId(std::string_view text);
// `--env` entries "K=V" into a map (a later entry for a key wins). The first entry without '=' or
// with an empty key is an InvalidArgument naming that entry.
Result<std::map<std::string, std::string>> parseEnvEntries(const std::vector<std::string>& entries);

// `--cpus` as millicores: "2" -> 2000, "0.5" -> 500, "250m" -> 250.
Result<int> parseCpuMillis(std::string_view text);
// `--memory` as MiB: "512" and "512Mi" -> 512, "16G"/"16Gi" -> 16384, "1T"/"1Ti" -> 1048576.
// Errors name `flag`.
Result<int64_t> parseMemoryMib(std::string_view text, std::string_view flag = "--memory");

// `allot run --gpus`: a whole number of GPUs, or a fraction of one shared GPU in thousandths.
struct GpuAmount {
  int gpus = 0;
  int milli = 1000;  // per GPU; below 1000 only with gpus == 1
};
// "2" -> {2, 1000}; "0.5" -> {1, 500}; "0.25" -> {1, 250}. A fraction must be below 1 with at
// most three decimals ("1.5" and "0.0001" are refused).
Result<GpuAmount> parseGpuAmount(std::string_view text);
// `--gpus A100=4 --gpus H100=2,T4=1` -> {A100: 4, H100: 2, T4: 1}; counts are whole numbers >= 0.
Result<std::map<std::string, int>> parseGpuCounts(const std::vector<std::string>& entries);
// "A100,H100" -> {"A100", "H100"}, spaces around names dropped.
std::vector<std::string> splitList(std::string_view text);
// A limit flag: a whole number >= 0, or "unlimited" (or the older "none") -> -1. Errors name
// `flag`.
Result<int> parseLimit(std::string_view text, std::string_view flag);

// "&from=...&to=..." for --from and --to as given (either may be empty, then left out), resolved
// here to ISO 8601 so the server sees the moment the user meant ("-30d" is from now, here).
// Errors name the flag.
Result<std::string> windowQuery(const std::string& from, const std::string& to, TimeMs now);

// "3m ago" / "in 5h" / "just now" for an ISO 8601 time; "-" for an empty or unparsable one.
std::string relativeTime(std::string_view iso, TimeMs now);
// `obj[key]`, an ISO 8601 time, with how long ago (or from now) it is: "2026-12-01T09:00:00Z (2h
// ago)"; "-" when absent.
std::string timeText(const json& obj, const char* key, TimeMs now);
// Coarse age: "45s", "3m", "2h", "5d".
std::string coarseDuration(TimeMs ms);
// How long a job ran, or has been running: "3m12s"; "-" before it started.
std::string jobDuration(const json& job, TimeMs now);
// "80 GiB", "1.5 GiB", "512 MiB".
std::string formatMib(int64_t mib);
// A byte count as people read it: "512 B", "3.4 KiB", "104.0 MiB", "1.5 GiB".
std::string formatBytes(int64_t bytes);
// The command as one shell-like line, quoting arguments that need it.
std::string shellJoin(const std::vector<std::string>& argv);

// A field as text: strings as they are, numbers and bools printed, null/missing as `missing`.
std::string text(const json& obj, const char* key, const std::string& missing = "-");
// Whether a boolean field is present and true.
bool isTrue(const json& obj, const char* key);
// The job's id as "j-42", whether the API sent a number or a string.
std::string jobIdText(const json& job);

}  // namespace allot::cli
