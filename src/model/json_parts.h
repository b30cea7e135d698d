#pragma once
// The pieces of JSON that the API's forms (model/json.h) and the store's documents
// (store/documents.h) share word for word, so that a field has one name in both. Each view adds
// its own: the API ISO 8601 times and nulls, the store times in ms and the secrets' hashes.

#include "model/json.h"

namespace allot::model {

json teamRolesJson(const std::map<std::string, Role>& teams);
// A user's teams and roles, kind, source and whether disabled.
json userAccess(const User& u);
// What identifies an SSH key: fingerprint, type and comment.
json sshKeyIdentity(const SshKey& k);
// A project's name, team and guaranteed split.
json projectSplit(const Project& p);
// A host's hardware and its agent.
json hostHardware(const Host& h);
// A rank's host, GPUs, state and exit; the API adds its number, the store its message.
json rankJson(const Rank& k);
// A job's request and where it stands: every field but times, texts and ranks.
json jobCommon(const Job& j);
// The command cut to `max` bytes, the last argument kept ending in "..." (cut at a character
// boundary), for a listing; nullopt when it fits with the environment (or max is 0).
std::optional<std::vector<std::string>> cutSpec(const Job& j, size_t max);
// [{"kind": "afterok", "job": 12}]
json dependenciesJson(const std::vector<Dependency>& deps);
// A job array task's {id, index, limit}; null for a job that is not one.
json arrayJson(const Job& j);
json upgradeHostCommon(const UpgradeHost& h);
json upgradeCommon(const Upgrade& u);
// Who asked for a lease, for what, and where it stands.
json leaseRequest(const Lease& l);
// What a session of a profile runs, and with what.
json profileSpec(const Profile& p);
json profileResourcesJson(const ProfileResources& r, bool withMilli);

}  // namespace allot::model
