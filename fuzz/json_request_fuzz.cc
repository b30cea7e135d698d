// libFuzzer target (clang's, from Debian): the JSON request reader that every API body goes
// through (api/json_input.h, bounded by common/bounded_json.h) and the audit log's redaction of
// what it keeps (api/redact.h), whose check of the text never passes a secret that its walk of
// the keys would find. Whatever the bytes, neither may crash, hang or recurse without a bound;
// ASan and UBSan watch the memory. Run by ctest for a bounded time (fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/json_input.h"
#include "api/redact.h"
#include "common/bounded_json.h"
#include "common/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  // As a route reads a job's body: every typed accessor on whatever parsed.
  auto in = allot::api::JsonInput::parse(
      body, {"name", "team", "command", "env", "gpus", "gpu_milli", "preemptible", "hosts"});
  if (in.ok()) {
    (void)in->optionalString("name");
    (void)in->requiredString("team");
    (void)in->optionalStringArray("command");
    (void)in->optionalStringMap("env");
    (void)in->optionalNumber("gpus", 0);
    (void)in->optionalInt("gpu_milli", 0, 0, 1000);
    (void)in->optionalBool("preemptible", false);
    (void)in->optionalIntArray("hosts", 0, 1024);
  }
  // As the audit capture keeps a request: parsed, redacted, written back as text.
  nlohmann::json doc = allot::parseBoundedJson(body);
  if (!doc.is_discarded()) {
    // The audit keeps a body, or a reply's dumped text, as it is when its text spells no secret
    // word (textMayNameSecrets): that is safe only if no key of the document then names one.
    const std::string dumped = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const bool secret = allot::api::holdsSecrets(doc);
    if (secret &&
        (!allot::api::textMayNameSecrets(body) || !allot::api::textMayNameSecrets(dumped)))
      __builtin_trap();
    const std::string kept = allot::api::redactSecrets(std::move(doc))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!allot::isValidUtf8(kept)) __builtin_trap();  // what the store takes
  }
  // And the cut the API makes of names: always UTF-8 again.
  if (allot::isValidUtf8(body) && !allot::isValidUtf8(allot::cutUtf8(body, size / 2)))
    __builtin_trap();
  return 0;
}
