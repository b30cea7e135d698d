#pragma once
// The documents the store keeps of the model's values (the `doc` column of each table): every
// field, times in Unix ms, secrets' hashes included. The API's forms are model/json.h; the pieces
// both views share word for word, so that a field has one name in each, are model/json_parts.h.
// A document that does not decode is an Internal error naming what failed, never an exception
// out of the store. Fields are added, never renamed: a document written by an older allotd loads
// with the new fields' defaults (store/migrations for the columns).

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/model.h"

namespace allot::store {

using nlohmann::json;

json toStoreDoc(const model::Team& t);
json toStoreDoc(const model::User& u);
json toStoreDoc(const model::Project& p);
json toStoreDoc(const model::Host& h);
json toStoreDoc(const model::Job& j);
// toStoreDoc(j) as the text the store keeps (dumped, invalid UTF-8 replaced), written directly for
// a single-host job without a session: every job is stored at least three times in its life
// (submitted, started, ended), and building the document first was most of that.
std::string storeDocText(const model::Job& j);
json toStoreDoc(const model::Upgrade& u);
json toStoreDoc(const model::Lease& l);
json toStoreDoc(const model::Profile& p);

Result<model::Team> teamFromStoreDoc(const json& doc);
Result<model::User> userFromStoreDoc(const json& doc);
Result<model::Project> projectFromStoreDoc(const json& doc);
Result<model::Host> hostFromStoreDoc(const json& doc);
Result<model::Job> jobFromStoreDoc(const json& doc);
Result<model::Upgrade> upgradeFromStoreDoc(const json& doc);
Result<model::Lease> leaseFromStoreDoc(const json& doc);
Result<model::Profile> profileFromStoreDoc(const json& doc);

}  // namespace allot::store
