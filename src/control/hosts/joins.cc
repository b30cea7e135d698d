// Joins and host views: join tokens, a host's first join and its credential, resets, and who
// sees which host and who holds its GPUs.

#include <spdlog/spdlog.h>

#include "common/secrets.h"
#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

Result<Change<CreatedJoinToken>> HostService::createJoinToken(const Principal& p, int64_t ttlMs,
                                                              int uses) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "create join tokens"));
  if (ttlMs <= 0) return Status::InvalidArgument("ttl: must be positive", "ttl");
  if (uses < 1 || uses > kMaxJoinTokenUses)
    return Status::InvalidArgument("uses: must be from 1 to " + std::to_string(kMaxJoinTokenUses),
                                   "uses");
  Change<CreatedJoinToken> c;
  auto now = clock_.nowMs();
  c.value.token = model::JoinToken{world_.newSecretId("join"), "", p.name, now, now + ttlMs, uses};
  c.value.secret = newToken(c.value.token.id);
  c.value.token.hash = hashToken(c.value.secret);
  world_.joinTokens[c.value.token.id] = c.value.token;
  c.batch.add(store::PutJoinToken{c.value.token});
  return c;
}

Result<std::vector<model::JoinToken>> HostService::listJoinTokens(const Principal& p) const {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "list join tokens"));
  std::vector<model::JoinToken> out;
  for (const auto& [id, t] : world_.joinTokens) out.push_back(t);
  return out;
}

Result<Change<model::JoinToken>> HostService::revokeJoinToken(const Principal& p,
                                                              const std::string& id) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "revoke join tokens"));
  auto it = world_.joinTokens.find(id);
  if (it == world_.joinTokens.end()) return Status::NotFound("no join token '" + id + "'");
  Change<model::JoinToken> c;
  // Revoking twice keeps the first time: the record says when it stopped working.
  if (it->second.revokedAt == 0) {
    it->second.revokedAt = clock_.nowMs();
    c.batch.add(store::PutJoinToken{it->second});
    spdlog::info("join token revoked: id={} by={}", id, p.name);
  }
  c.value = it->second;
  return c;
}

Result<Change<JoinedHost>> HostService::joinHost(std::string_view secret, const std::string& nameIn,
                                                 const model::Inventory& inv) {
  auto sep = secret.find('_');
  auto it = sep == std::string_view::npos
                ? world_.joinTokens.end()
                : world_.joinTokens.find(std::string(secret.substr(0, sep)));
  if (it == world_.joinTokens.end() || !hashesEqual(it->second.hash, hashToken(secret)))
    return Status::Unauthenticated("join_token: unknown join token");
  model::JoinToken& token = it->second;
  if (token.revokedAt != 0)
    return Status::Unauthenticated("join_token: the join token was revoked");
  if (token.expiresAt <= clock_.nowMs())
    return Status::Unauthenticated(
        "join_token: the join token has expired; make a new one with `allot host join-token`");
  if (token.usesLeft() <= 0)
    return Status::Unauthenticated(
        "join_token: the join token has been used up; make a new one with `allot host "
        "join-token`");
  std::string name = nameIn.empty() ? inv.hostname : nameIn;
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  auto existing = world_.hosts.find(name);
  if (existing != world_.hosts.end() && !existing->second.credentialReset) {
    // Whoever holds a join token could otherwise take over a running host's identity (and the
    // work placed on it). A reinstalled host needs an admin's word first.
    return Status::AlreadyExists("name: host '" + name +
                                 "' has already joined; a platform admin must reset its "
                                 "credential (`allot host reset-credential " +
                                 name + "`) before it can join again");
  }
  Change<JoinedHost> c;
  auto now = clock_.nowMs();
  model::Host h;
  if (existing != world_.hosts.end()) {
    // Re-joining after a reset (a reinstalled host, a lost credential): the host keeps its name
    // and history. Its old credentials were revoked by the reset.
    h = existing->second;
    h.credentialReset = false;
    access_.revokeHostCredentials(name, c.batch);
  } else {
    h.name = name;
    h.joinedAt = now;
    h.contour = options_.contours.defaultContour;
    // A new host takes work once commissioning has checked it (host_tasks.cc).
    if (options_.lifecycle.commission) h.adminState = model::AdminState::kRegistering;
  }
  model::applyInventory(h, inv);
  world_.hosts[name] = h;
  c.value.credential =
      access_
          .mintToken({"", "host:" + name, "", now, 0, "", model::TokenKind::kHost}, "hst", c.batch)
          .secret;
  // The use is counted in the same commit as the host: no restart or concurrent join can admit
  // more hosts than the token allows.
  ++token.used;
  c.value.host = h;
  c.batch.add(store::PutHost{h}).add(store::PutJoinToken{token});
  spdlog::info("host joined: host={} gpus={} provider={}{} join_token={} uses_left={}", name,
               h.gpus.size(), h.gpuProvider, h.simulated ? " (SIMULATED)" : "", token.id,
               token.usesLeft());
  return c;
}

Result<Change<model::Host>> HostService::resetHostCredential(const Principal& p,
                                                             const std::string& name) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "reset a host's credential"));
  Change<model::Host> c;
  access_.revokeHostCredentials(name, c.batch);
  it->second.credentialReset = true;
  c.batch.add(store::PutHost{it->second});
  c.value = it->second;
  spdlog::warn("host credential reset: host={} by={}; its agent must join again", name, p.name);
  return c;
}

std::vector<model::Host> HostService::listHosts(const Principal& p) const {
  std::vector<model::Host> out;
  for (const auto& [name, h] : world_.hosts) {
    if (authz::canSeeHost(p, h)) out.push_back(authz::visibleHost(p, h));
  }
  return out;
}

Result<model::Host> HostService::getHost(const Principal& p, const std::string& name) const {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  return authz::visibleHost(p, it->second);
}

std::vector<GpuAllocation> HostService::allocations(const Principal& p,
                                                    const std::string& host) const {
  std::vector<GpuAllocation> out;
  auto h = world_.hosts.find(host);
  auto it = world_.gpuHolders().find(host);
  if (h == world_.hosts.end() || it == world_.gpuHolders().end()) return out;
  if (!authz::canSeeHost(p, h->second)) return out;
  for (const auto& [gpu, jobId] : it->second) {
    auto g = std::find_if(h->second.gpus.begin(), h->second.gpus.end(),
                          [&](const model::Gpu& x) { return x.index == gpu; });
    if (g != h->second.gpus.end() && !authz::canSeeGpu(p, *g)) continue;
    const auto& j = world_.job(jobId);
    out.push_back({gpu, jobId, j.team, j.user, j.project, j.startedAt ? j.startedAt : j.scheduledAt,
                   j.resources.gpuMilli});
  }
  return out;
}

}  // namespace allot::control
