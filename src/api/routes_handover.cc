// Routes for handing hosts between owners: assign to a team, unassign back to the shared pool,
// and the live output of the task a host runs. Shapes in docs/api.md; semantics in docs/hosts.md.

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "model/json.h"

namespace allot::api {
namespace {

constexpr int kMaxGpuIndex = 1023;

// The drain's deadline: how long others' work may run on before it is preempted; "0s" or absent
// preempts at once, as a handover is asked for when the host is needed.
Result<int64_t> readDeadline(const JsonInput& in) {
  auto text = in.optionalString("deadline");
  if (!text.ok()) return text.status();
  if (text->empty()) return int64_t{0};
  auto d = parseDurationMs(*text);
  if (!d.ok() || *d < 0)
    return Status::InvalidArgument("deadline: '" + *text + "' is not a duration (e.g. 30m, 0s)",
                                   "deadline");
  return *d;
}

}  // namespace

void registerHandoverRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::post, "/api/v1/hosts/{name}/assign", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"team", "gpus", "deadline", "reason"}));
    TRY_ASSIGN(team, in.requiredString("team"));
    if (team.empty())
      co_return ApiResponse::error(
          Status::InvalidArgument("team: must name a team (unassign returns a host)", "team"));
    TRY_ASSIGN(gpus, in.optionalIntArray("gpus", 0, kMaxGpuIndex));
    TRY_ASSIGN(deadlineMs, readDeadline(in));
    TRY_ASSIGN(reason, readReason(in));
    TRY_ASSIGN(change, s.cluster().hosts().assignHost(r.who(), r.params["name"], team, gpus,
                                                      deadlineMs, reason));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::post, "/api/v1/hosts/{name}/unassign", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"gpus", "deadline", "reason"}));
    TRY_ASSIGN(gpus, in.optionalIntArray("gpus", 0, kMaxGpuIndex));
    TRY_ASSIGN(deadlineMs, readDeadline(in));
    TRY_ASSIGN(reason, readReason(in));
    TRY_ASSIGN(change, s.cluster().hosts().assignHost(r.who(), r.params["name"], "", gpus,
                                                      deadlineMs, reason));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  // The running task's output from `offset`: {task_id, running, offset, data}. A follower asks
  // again from offset + data's length until running is false, then reads the record.
  router.add(V::get, "/api/v1/hosts/{name}/task-output", [&s](ApiRequest& r) -> Awaitable {
    int64_t offset = 0;
    if (auto it = r.query.find("offset"); it != r.query.end()) {
      try {
        size_t used = 0;
        offset = std::stoll(it->second, &used);
        if (used != it->second.size()) throw std::invalid_argument("trailing");
      } catch (...) {
        co_return ApiResponse::error(
            Status::InvalidArgument("offset: '" + it->second + "' is not a byte offset", "offset"));
      }
    }
    TRY_ASSIGN(view, s.cluster().hosts().taskOutput(r.who(), r.params["name"], offset));
    co_return ApiResponse::json(nlohmann::json{{"task_id", view.taskId},
                                               {"running", view.running},
                                               {"offset", view.offset},
                                               {"data", view.data}});
  });
}

}  // namespace allot::api
