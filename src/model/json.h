#pragma once
// The API's JSON forms of the domain values, which the agent protocol's field codecs also use for
// the hardware it reports (model/agent_protocol.h). Times are ISO 8601 ("*_at"). The store's
// documents are store/documents.h; what both views share, so that a field has one name (snake_case)
// in each, is model/json_parts.h.

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

Gpu gpuFromJson(const json& j);

json toJson(const Lease& l);    // lease_json.cc
json toJson(const Profile& p);  // profile_json.cc

}  // namespace allot::model
