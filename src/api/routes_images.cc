// Routes for each host's image cache (docs/environments.md, "The cache"): what it holds, a prune,
// a prepull. Shapes in docs/api.md.

#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"

namespace allot::api {
namespace {

nlohmann::json hostImagesJson(const control::HostImages& h) {
  using nlohmann::json;
  json images = json::array(), prepulls = json::array();
  const model::ImageReport* r = h.report ? &*h.report : nullptr;
  if (r) {
    for (const auto& i : r->images)
      images.push_back(
          {{"ref", i.ref},
           {"digest", i.digest},
           {"bytes", i.bytes},
           {"last_used_at", i.lastUsedMs > 0 ? json(formatIso8601(i.lastUsedMs)) : json(nullptr)},
           {"in_use", i.inUse},
           {"min_cuda", i.minCuda.empty() ? json(nullptr) : json(i.minCuda)}});
  }
  // Each prepull still asked: "asked" until the agent takes it up, then "pulling" (or "failed",
  // for the moment between the agent's report and allotd dropping it).
  for (const auto& ref : h.prepullsAsked) {
    json p = {{"ref", ref}, {"state", "asked"}, {"bytes", 0}, {"total", 0}, {"message", nullptr}};
    if (r) {
      for (const auto& s : r->prepulls) {
        if (s.ref != ref) continue;
        p["state"] = s.failed ? "failed" : "pulling";
        p["bytes"] = s.bytes;
        p["total"] = s.total;
        if (!s.message.empty()) p["message"] = s.message;
      }
    }
    prepulls.push_back(std::move(p));
  }
  return {{"host", h.host},
          {"reported_at", h.reportedAt > 0 ? json(formatIso8601(h.reportedAt)) : json(nullptr)},
          {"disk_bytes", r ? json(r->diskBytes) : json(nullptr)},
          {"budget_bytes", r && r->budgetBytes > 0 ? json(r->budgetBytes) : json(nullptr)},
          {"images", images},
          {"prepulls", prepulls},
          {"prunes", {{"asked", h.prunesAsked}, {"done", r ? r->prunesDone : 0}}}};
}

}  // namespace

void registerImageRoutes(Router& router, Server& s) {
  using V = boost::beast::http::verb;
  router.add(V::get, "/api/v1/hosts/{name}/images", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(images, s.cluster().imageCache().hostImages(r.who(), r.params["name"]));
    co_return ApiResponse::json(hostImagesJson(images));
  });
  router.add(V::post, "/api/v1/hosts/{name}/images/prune", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {}));
    (void)in;
    TRY_ASSIGN(change, s.cluster().imageCache().prune(r.who(), r.params["name"]));
    co_await s.apply(r, change);
    co_return ApiResponse::json(hostImagesJson(change.value), http::status::accepted);
  });
  router.add(V::post, "/api/v1/images/prepull", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"image", "hosts", "pool", "team"}));
    TRY_ASSIGN(image, in.requiredString("image"));
    TRY_ASSIGN(hosts, in.optionalStringArray("hosts"));
    TRY_ASSIGN(pool, in.optionalString("pool"));
    TRY_ASSIGN(team, in.optionalString("team"));
    TRY_ASSIGN(change, s.cluster().imageCache().prepull(r.who(), image, hosts, pool, team));
    co_await s.apply(r, change);
    co_return ApiResponse::json(nlohmann::json{{"image", image}, {"hosts", change.value}},
                                http::status::accepted);
  });
}

}  // namespace allot::api
