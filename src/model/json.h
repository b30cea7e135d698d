#pragma once
// JSON forms of the domain values. One form serves the API, the store's documents and the agent
// protocol, so a field has one name everywhere (snake_case). Times are ISO 8601 in the API
// ("*_at") and Unix milliseconds in stored documents ("*_ms"); `forStore` picks.

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/model.h"

namespace allot::model {

using nlohmann::json;

// GPU counts by model; the any-model key "" reads and writes as "any".
inline constexpr const char* kAnyModelJsonKey = "any";
json guaranteedJson(const std::map<std::string, int>& guaranteed);
std::map<std::string, int> guaranteedFromJson(const json& j);

json toJson(const Team& t);
// A team's quota settings: {"guaranteed","borrow_limit","lend_limit","weight","lend_dedicated"}.
json quotaJson(const Team& t);
json toJson(const User& u);
json toStoreDoc(const User& u);
Result<User> userFromStoreDoc(const json& doc);
json toJson(const SshKey& k);
json toJson(const ApiToken& t);
json toJson(const Project& p);
json toJson(const Gpu& g);
json gpusJson(const std::vector<Gpu>& gpus);
json toJson(const Host& h);
json toJson(const HostTransition& t);
json toJson(const Job& j);
// A listing's view of a job: whole while its command and environment take at most
// `maxSpecBytes`; a larger one shows no environment, its command cut there (the last argument
// kept ends in "..."), and "spec_truncated": true. GET /jobs/{id} shows it whole.
json toListedJson(const Job& j, size_t maxSpecBytes);
json toJson(const SessionSpec& s);
SessionSpec sessionSpecFromJson(const json& j);
json toJson(const Upgrade& u);
// An event as the API and webhooks show it.
json toJson(const Event& e);

// Documents for the store: every field, times in ms, secrets' hashes included. A document that
// does not decode is an Internal error, never an exception out of the model.
json toStoreDoc(const Team& t);
json toStoreDoc(const Project& p);
Result<Team> teamFromStoreDoc(const json& doc);
Result<Project> projectFromStoreDoc(const json& doc);
json toStoreDoc(const Host& h);
json toStoreDoc(const Job& j);
Result<Host> hostFromStoreDoc(const json& doc);
Result<Job> jobFromStoreDoc(const json& doc);
json toStoreDoc(const Upgrade& u);
Result<Upgrade> upgradeFromStoreDoc(const json& doc);
Gpu gpuFromJson(const json& j);

// Leases (lease_json.cc): the API's form, and the store's.
json toJson(const Lease& l);
json toStoreDoc(const Lease& l);
Result<Lease> leaseFromStoreDoc(const json& doc);

// Session profiles (profile_json.cc): the API's form, and the store's.
json toJson(const Profile& p);
json toStoreDoc(const Profile& p);
Result<Profile> profileFromStoreDoc(const json& doc);

}  // namespace allot::model
