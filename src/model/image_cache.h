#pragma once
// The image cache of a host, between allotd and its agent (docs/environments.md, "The cache"):
// what allotd asks of it (ImageCommands, in the desired state) and what the agent says it holds
// (ImageReport, a message of its own: {"type":"images", ...}, sent when it changes and on each
// connection). Both are level-triggered like the rest of the protocol: allotd sends every
// command each time, the agent its whole cache.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::model {

// Bounds on what an agent may report (and allotd keep in memory for it).
inline constexpr size_t kMaxReportedImages = 4096;
inline constexpr size_t kMaxPrepulls = 64;     // references asked of one host at once
inline constexpr size_t kMaxImageText = 1024;  // a reference, a digest, a message

// A registry login, unsealed, for the pulls it is sent with (a team's model::RegistryLogin);
// the agent hands it to those pulls only and keeps it nowhere.
struct RegistryAuth {
  std::string registry, username, password;
};

struct ImageCommands {
  // Prunes asked so far: the agent removes every image no job uses when this passes the count
  // it has done (kept in its image store, so a restart does not prune again).
  int64_t prunes = 0;
  // References to have in the cache before any job asks for them; allotd drops each once the
  // agent reports it cached, or its pull failed.
  std::vector<std::string> prepulls{};
  // The login a prepull pulls with, by its reference (the team named for it, `allot image
  // prepull --team`, or the team of the host's pool); a prepull without one pulls without.
  std::map<std::string, RegistryAuth> prepullLogins{};
  bool empty() const { return prunes == 0 && prepulls.empty(); }
};

struct CachedImage {
  std::string ref{};     // as pulled
  std::string digest{};  // its manifest's
  int64_t bytes = 0;     // its compressed layers
  int64_t lastUsedMs = 0;
  bool inUse = false;     // a job that has not ended runs in it
  std::string minCuda{};  // its NVIDIA_REQUIRE_CUDA's "cuda>=X.Y"; "" = none
};

// A prepull not done yet: being pulled (bytes of total, why it is slow), or failed (final).
struct PrepullState {
  std::string ref;
  bool failed = false;
  std::string message;
  int64_t bytes = 0, total = 0;
};

struct ImageReport {
  std::vector<CachedImage> images;
  int64_t diskBytes = 0;    // what the store takes: blobs and unpacked layers
  int64_t budgetBytes = 0;  // allot-agent --image-budget; 0: none
  int64_t prunesDone = 0;
  std::vector<PrepullState> prepulls;
};

nlohmann::json toJson(const ImageCommands& c);
Result<ImageCommands> imageCommandsFromJson(const nlohmann::json& j);
// {"type":"images", ...}
std::string encodeImageReport(const ImageReport& r);
// Within the bounds above; the error names the first bad field.
Result<ImageReport> imageReportFromJson(const nlohmann::json& msg);

}  // namespace allot::model
