// libFuzzer target (clang's, from Debian): what crosses a trust boundary into allotd or into a
// root process on a host, other than an API body (json_request_fuzz.cc has those):
//   - a login request, which a session's owner sends to the root allot-ssh-bridge
//     (agent/session/container_login.h), and the container's state and config.json it reads,
//     whose environment, user and seccomp program come from a team's image;
//   - an agent's frames to allotd, text (protocol/agent_messages.h, the image-cache report) and
//     binary (the tunnel's, model/tunnel_frame.h): an agent runs on a host a team may hold as
//     root;
//   - an image reference and an image's NVIDIA_REQUIRE_CUDA (model/image_ref.h);
//   - what a session's Jupyter answers the agent's idle probe (agent/session/jupyter_probe.h):
//     the session's owner runs that server.
// Whatever the bytes, none may crash, hang or recurse without a bound; ASan and UBSan watch the
// memory. The first byte picks the decoder, so one corpus reaches all of them. Run by ctest for a
// bounded time (fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/session/container_login.h"
#include "agent/session/jupyter_probe.h"
#include "common/bounded_json.h"
#include "model/image_cache.h"
#include "model/image_ref.h"
#include "model/tunnel_frame.h"
#include "protocol/agent_messages.h"

namespace {

void loginRequest(const std::string& text) {
  auto request = allot::agent::decodeLoginRequest(text);
  if (!request.ok()) return;
  allot::agent::ContainerProcess process;
  process.env = {"PATH=/usr/bin:/bin", "HOME=/home/u"};
  (void)allot::agent::loginEnvironment(process, *request, "u", "/bin/sh");
  (void)allot::agent::loginArgv("/bin/sh", request->command);
  // What the owner's side would send for it decodes to the same request.
  auto again = allot::agent::decodeLoginRequest(allot::agent::encodeLoginRequest(*request));
  if (!again.ok() || again->command != request->command || again->tty != request->tty ||
      again->env != request->env)
    __builtin_trap();
}

// The two files, split where the input has its first NUL (all of it is the config otherwise).
void containerProcess(const std::string& text) {
  const size_t cut = text.find('\0');
  const std::string status = cut == std::string::npos ? "" : text.substr(0, cut);
  const std::string config = cut == std::string::npos ? text : text.substr(cut + 1);
  auto process = allot::agent::parseContainerProcess(status, config);
  if (process.ok() && process->pid <= 0) __builtin_trap();  // never a login into pid 0 or -1
}

void agentFrame(const std::string& text) {
  (void)allot::model::decodeLogChunk(text);  // a job's output: a JSON header line, then bytes
  const nlohmann::json msg = allot::parseBoundedJson(text);
  if (msg.is_discarded()) return;
  (void)allot::protocol::messageType(msg);
  (void)allot::protocol::decodeAgentMessage(msg);
  (void)allot::protocol::decodeServerMessage(msg);
  (void)allot::model::imageReportFromJson(msg);
  (void)allot::model::imageCommandsFromJson(msg);
  (void)allot::model::inventoryFromJson(msg);  // as a host sends it to join
}

void tunnelFrame(std::string_view bytes) {
  (void)allot::model::isTunnelFrame(bytes);
  auto frame = allot::model::decodeTunnelFrame(bytes);
  if (!frame.ok()) return;
  (void)allot::model::tunnelWindowCredit(*frame);
  (void)allot::model::tunnelOpenFromPayload(frame->payload);
}

void imageText(const std::string& text) {
  (void)allot::model::parseImageRef(text);
  (void)allot::model::isCudaRequirement(text);
  std::vector<std::string> env;
  for (size_t start = 0; start <= text.size();) {
    const size_t nl = text.find('\n', start);
    env.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  (void)allot::model::cudaRequirementOf(env);
}

// api/status and api/kernels, split where the input has its first NUL.
void jupyterReplies(const std::string& text) {
  const size_t cut = text.find('\0');
  const std::string status = cut == std::string::npos ? text : text.substr(0, cut);
  const std::string kernels = cut == std::string::npos ? "[]" : text.substr(cut + 1);
  auto activity = allot::agent::jupyterActivityOf(status, kernels);
  if (activity && (activity->connections < 0 || activity->busyKernels < 0)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      loginRequest(text);
      break;
    case 1:
      containerProcess(text);
      break;
    case 2:
      agentFrame(text);
      break;
    case 3:
      tunnelFrame(text);
      break;
    case 5:
      jupyterReplies(text);
      break;
    default:
      imageText(text);
      break;
  }
  return 0;
}
