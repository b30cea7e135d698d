#include "control/images/registry_logins.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/sealed_box.h"
#include "control/authz.h"
#include "model/image_ref.h"

namespace allot::control {

namespace {

constexpr size_t kMaxUsername = 256;
constexpr size_t kMaxPassword = 4096;
constexpr size_t kMaxLoginsPerTeam = 32;

Status checkRegistry(const std::string& registry) {
  // The reference grammar decides what a registry is: a login is for what references name.
  auto ref = model::parseImageRef(registry + "/login");
  if (registry.empty() || !ref.ok() || ref->registry != registry)
    return Status::InvalidArgument(
        "registry: '" + registry + "' is not a registry as references name it (HOST[:PORT])",
        "registry");
  return Status::Ok();
}

bool printable(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace

RegistryLogins::RegistryLogins(const Clock& clock, World& world, const std::string& sealKey)
    : clock_(clock), world_(world), key_(sealKey.empty() ? newSealKey() : sealKey) {}

Result<model::Team*> RegistryLogins::manageable(const Principal& p, const std::string& team) {
  auto it = world_.teams.find(team);
  if (it == world_.teams.end() || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  return &it->second;
}

Result<Change<model::Team>> RegistryLogins::set(const Principal& p, const std::string& teamName,
                                                const std::string& registry,
                                                const std::string& username,
                                                const std::string& password) {
  auto team = manageable(p, teamName);
  if (!team.ok()) return team.status();
  ALLOT_RETURN_IF_ERROR(checkRegistry(registry));
  // Basic authentication joins the two with ':', so a username cannot hold one.
  if (username.empty() || username.size() > kMaxUsername || !printable(username) ||
      username.find(':') != std::string::npos)
    return Status::InvalidArgument(
        "username: 1 to " + std::to_string(kMaxUsername) + " printable characters, without ':'",
        "username");
  if (password.empty() || password.size() > kMaxPassword || !printable(password))
    return Status::InvalidArgument(
        "password: 1 to " + std::to_string(kMaxPassword) + " printable characters", "password");
  model::Team& t = **team;
  auto existing = std::find_if(t.registryLogins.begin(), t.registryLogins.end(),
                               [&](const auto& l) { return l.registry == registry; });
  if (existing == t.registryLogins.end()) {
    if (t.registryLogins.size() >= kMaxLoginsPerTeam)
      return Status::InvalidArgument("registry: team '" + t.name + "' has logins to " +
                                         std::to_string(kMaxLoginsPerTeam) +
                                         " registries already; remove one first",
                                     "registry");
    existing = t.registryLogins.insert(t.registryLogins.end(), model::RegistryLogin{});
  }
  *existing = {registry, username, seal(key_, password), p.name, clock_.nowMs()};
  std::sort(t.registryLogins.begin(), t.registryLogins.end(),
            [](const auto& a, const auto& b) { return a.registry < b.registry; });
  Change<model::Team> c;
  c.value = t;
  c.batch.add(store::PutTeam{t});
  return c;
}

Result<Change<model::Team>> RegistryLogins::remove(const Principal& p, const std::string& teamName,
                                                   const std::string& registry) {
  auto team = manageable(p, teamName);
  if (!team.ok()) return team.status();
  model::Team& t = **team;
  if (std::erase_if(t.registryLogins, [&](const auto& l) { return l.registry == registry; }) == 0)
    return Status::NotFound("team '" + t.name + "' has no login to '" + registry + "'", "registry");
  Change<model::Team> c;
  c.value = t;
  c.batch.add(store::PutTeam{t});
  return c;
}

std::optional<model::DesiredJob::RegistryAuth> RegistryLogins::authFor(
    const model::Job& job) const {
  if (job.image.empty()) return std::nullopt;
  return authFor(job.team, job.image, "job " + std::to_string(job.id));
}

std::optional<model::RegistryAuth> RegistryLogins::authFor(const std::string& teamName,
                                                           const std::string& image,
                                                           const std::string& what) const {
  auto team = world_.teams.find(teamName);
  if (team == world_.teams.end()) return std::nullopt;
  auto ref = model::parseImageRef(image);
  if (!ref.ok()) return std::nullopt;
  for (const auto& login : team->second.registryLogins) {
    if (login.registry != ref->registry) continue;
    auto password = unseal(key_, login.sealedPassword);
    if (!password.ok()) {
      spdlog::warn("team {}'s login to {} does not open: {}; {} pulls without it", teamName,
                   login.registry, password.status().message(), what);
      return std::nullopt;
    }
    return model::RegistryAuth{login.registry, login.username, *password};
  }
  return std::nullopt;
}

}  // namespace allot::control
