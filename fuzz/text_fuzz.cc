// libFuzzer target (clang's, from Debian): the hand-written parsers of strings a tenant sends in
// an API body, each checked for what its callers rely on, not only for crashes:
//   - an SSH public key (control/ssh_key.h), which goes verbatim into an authorized_keys file
//     that sshd reads as root: one line, no options before the key type;
//   - an idle webhook's URL (control/idle_policy.h), which allotd writes into a request line and
//     a Host header: no byte that could end either or start another;
//   - a job array's indices (control/job_request.h): ascending, distinct, within the limits;
//   - a time or a duration (common/time_format.h), and any http(s) URL (common/http_url.h).
// ASan and UBSan watch the memory. The first byte picks the parser, so one corpus reaches all of
// them. Run by ctest for a bounded time (fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/http_url.h"
#include "common/time_format.h"
#include "control/idle_policy.h"
#include "control/job_request.h"
#include "control/ssh_key.h"

namespace {

bool hasByteOf(std::string_view text, std::string_view bytes) {
  return text.find_first_of(bytes) != std::string_view::npos;
}

// Bytes that end a request line, a header or a word of either, or that nothing should carry.
constexpr std::string_view kBreaking("\r\n \t\0\x7f", 6);

void sshKey(const std::string& text) {
  auto key = allot::control::parseSshPublicKey(text);
  if (!key.ok()) return;
  const std::string line = allot::model::authorizedKeysLine(*key);
  if (hasByteOf(line, std::string_view("\r\n\0", 3))) __builtin_trap();
  // sshd reads options only before the type: the line must begin with it.
  if (line.rfind(key->type + " ", 0) != 0 || hasByteOf(key->type, kBreaking) ||
      hasByteOf(key->blob, kBreaking) || key->fingerprint.rfind("SHA256:", 0) != 0)
    __builtin_trap();
}

void webhook(const std::string& text) {
  auto target = allot::control::parseWebhookUrl(text);
  if (!target.ok()) return;
  if (target->host.empty() || hasByteOf(target->host, kBreaking) ||
      hasByteOf(target->target, kBreaking) || target->target.empty() ||
      target->target.front() != '/' || target->port == 0)
    __builtin_trap();
  for (unsigned char c : target->host + target->target)
    if (c < 0x20) __builtin_trap();
}

void arraySpec(const std::string& text) {
  auto array = allot::control::parseArraySpec(text);
  if (!array.ok()) return;
  if (array->indices.empty() || array->limit < 0 ||
      array->indices.size() > static_cast<size_t>(allot::control::kMaxArrayTasks))
    __builtin_trap();
  for (size_t i = 0; i < array->indices.size(); ++i) {
    const int index = array->indices[i];
    if (index < 0 || index > allot::control::kMaxArrayIndex) __builtin_trap();
    if (i > 0 && index <= array->indices[i - 1]) __builtin_trap();
  }
}

void timeText(const std::string& text) {
  (void)allot::parseTime(text, 1'780'000'000'000);
  auto duration = allot::parseDurationMs(text);
  if (duration.ok() && *duration < 0) __builtin_trap();
  (void)allot::parseHttpUrl(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      sshKey(text);
      break;
    case 1:
      webhook(text);
      break;
    case 2:
      arraySpec(text);
      break;
    default:
      timeText(text);
      break;
  }
  return 0;
}
