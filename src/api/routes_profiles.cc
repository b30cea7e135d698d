// Routes for session profiles: list, show, create, replace, delete. Shapes in docs/api.md; what
// they mean in docs/sessions.md.

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "model/json.h"
#include "model/resource_limits.h"

namespace allot::api {
namespace {

// A nested object's error names its field in full: "defaults.gpus", not "gpus".
Status nested(const Status& st, const std::string& prefix) {
  if (st.ok() || st.code() != Code::kInvalidArgument) return st;
  const std::string field =
      st.field().empty() || st.field() == "body" ? prefix : prefix + "." + st.field();
  return Status::InvalidArgument(prefix + "." + st.message(), field);
}

// The object at `field` as a JsonInput of its own (absent or null reads as {}).
Result<JsonInput> subObject(const JsonInput& in, const char* field,
                            std::initializer_list<const char*> allowed) {
  auto it = in.root().find(field);
  const nlohmann::json* obj = it == in.root().end() ? nullptr : &*it;
  if (obj != nullptr && !obj->is_null() && !obj->is_object())
    return Status::InvalidArgument(
        std::string(field) + ": must be an object, got " + jsonTypeName(*obj), field);
  auto sub = JsonInput::parse(obj == nullptr || obj->is_null() ? "" : obj->dump(), allowed);
  if (!sub.ok()) return nested(sub.status(), field);
  return sub;
}

Result<TimeMs> readDuration(const JsonInput& in, const char* field, const std::string& full,
                            TimeMs fallback) {
  auto text = in.optionalString(field);
  if (!text.ok()) {
    const size_t dot = full.find('.');
    return dot == std::string::npos ? text.status() : nested(text.status(), full.substr(0, dot));
  }
  if (text->empty()) return fallback;
  auto ms = parseDurationMs(*text);
  if (!ms.ok()) return Status::InvalidArgument(full + ": " + ms.status().message(), full);
  return *ms;
}

// The body of POST and PUT: the whole profile (PUT replaces every field).
Result<model::Profile> readProfile(const std::string& body) {
  auto in =
      JsonInput::parse(body, {"name", "team", "description", "command", "image", "env", "defaults",
                              "maxima", "storage", "idle", "max_lifetime", "visible_to"});
  if (!in.ok()) return in.status();
  model::Profile p;
  auto name = in->optionalString("name");
  if (!name.ok()) return name.status();
  p.name = *name;
  auto team = in->optionalString("team");
  if (!team.ok()) return team.status();
  p.team = *team;
  auto description = in->optionalString("description");
  if (!description.ok()) return description.status();
  p.description = *description;
  auto command = in->requiredStringArray("command");
  if (!command.ok()) return command.status();
  p.command = *command;
  auto image = in->optionalString("image");
  if (!image.ok()) return image.status();
  p.image = *image;
  auto env = in->optionalStringMap("env");
  if (!env.ok()) return env.status();
  p.env = *env;

  auto defaults = subObject(*in, "defaults", {"gpus", "gpu_milli", "cpu_millis", "memory_mib"});
  if (!defaults.ok()) return defaults.status();
  auto maxima = subObject(*in, "maxima", {"gpus", "cpu_millis", "memory_mib"});
  if (!maxima.ok()) return maxima.status();
  struct Target {
    JsonInput* in;
    const char* prefix;
    model::ProfileResources* out;
  };
  for (Target t :
       {Target{&*defaults, "defaults", &p.defaults}, Target{&*maxima, "maxima", &p.maxima}}) {
    auto gpus = t.in->optionalInt("gpus", 0, 0, model::kMaxRequestGpus);
    if (!gpus.ok()) return nested(gpus.status(), t.prefix);
    t.out->gpus = *gpus;
    auto cpu = t.in->optionalInt("cpu_millis", 0, 0, model::kMaxRequestCpuMillis);
    if (!cpu.ok()) return nested(cpu.status(), t.prefix);
    t.out->cpuMillis = *cpu;
    auto mem = t.in->optionalInt("memory_mib", 0, 0, model::kMaxRequestMemoryMib);
    if (!mem.ok()) return nested(mem.status(), t.prefix);
    t.out->memoryMib = *mem;
  }
  auto milli = defaults->optionalInt("gpu_milli", 1000, 1, 1000);
  if (!milli.ok()) return nested(milli.status(), "defaults");
  p.defaults.gpuMilli = *milli;

  if (in->has("storage")) {
    auto storage = in->optionalStringArray("storage");
    if (!storage.ok()) return storage.status();
    p.storage = *storage;
  }
  auto idle = subObject(*in, "idle", {"threshold_percent", "after"});
  if (!idle.ok()) return idle.status();
  auto threshold = idle->optionalNumber("threshold_percent", p.idleThresholdPct);
  if (!threshold.ok()) return nested(threshold.status(), "idle");
  p.idleThresholdPct = *threshold;
  auto after = readDuration(*idle, "after", "idle.after", p.idleAfterMs);
  if (!after.ok()) return after.status();
  p.idleAfterMs = *after;
  auto lifetime = readDuration(*in, "max_lifetime", "max_lifetime", 0);
  if (!lifetime.ok()) return lifetime.status();
  p.maxLifetimeMs = *lifetime;
  auto visible = in->optionalStringArray("visible_to");
  if (!visible.ok()) return visible.status();
  p.visibleTo = *visible;
  return p;
}

// What `p` may read of a profile: a platform-wide one offered to several teams names only the
// caller's among them (other teams' names are not theirs to learn); platform admins see all.
model::Profile asSeenBy(const control::Principal& p, model::Profile profile) {
  if (!p.isAdmin())
    std::erase_if(profile.visibleTo, [&](const std::string& team) { return !p.inTeam(team); });
  return profile;
}

}  // namespace

void registerProfileRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::get, "/api/v1/profiles", [&s](ApiRequest& r) -> Awaitable {
    auto profiles = s.cluster().profiles().list(r.who());
    for (auto& profile : profiles) profile = asSeenBy(r.who(), std::move(profile));
    co_return ApiResponse::json(arrayOf(profiles));
  });
  router.add(V::post, "/api/v1/profiles", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(profile, readProfile(r.raw.body()));
    if (profile.name.empty())
      co_return ApiResponse::error(Status::InvalidArgument("name: is required", "name"));
    TRY_ASSIGN(change, s.cluster().profiles().create(r.who(), std::move(profile)));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });
  router.add(V::get, "/api/v1/profiles/{name}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(profile, s.cluster().profiles().get(r.who(), r.params["name"]));
    co_return ApiResponse::json(model::toJson(asSeenBy(r.who(), std::move(profile))));
  });
  router.add(V::put, "/api/v1/profiles/{name}", [&s](ApiRequest& r) -> Awaitable {
    // Who may see it is decided before the body is judged: another team's profile is 404
    // whatever the body says.
    TRY_ASSIGN(seen, s.cluster().profiles().get(r.who(), r.params["name"]));
    TRY_ASSIGN(profile, readProfile(r.raw.body()));
    TRY_ASSIGN(change, s.cluster().profiles().replace(r.who(), seen.name, std::move(profile)));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });
  router.add(V::delete_, "/api/v1/profiles/{name}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().profiles().remove(r.who(), r.params["name"]));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });
}

}  // namespace allot::api
