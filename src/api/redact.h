#pragma once
// Secrets out of what is kept: the audit log stores requests and resources as JSON, and no
// password or token may be among them.

#include <nlohmann/json.hpp>
#include <string_view>

namespace allot::api {

// Whether a JSON key has a word naming a secret: password, pwd, token, secret, hash, key,
// credential, or a word ending in password, token, secret or credential ("join_token",
// "HF_TOKEN", "apiKey", "HFToken", "PGPASSWORD", "MYSQL_PWD", "GITHUB_TOKEN2").
bool namesSecret(std::string_view key);

// Replaces with "[redacted]" the value of every key, at any depth, that names a secret. Iterative:
// a document of any depth costs no stack (JSON from outside is also bounded when parsed, by
// common/bounded_json.h).
nlohmann::json redactSecrets(nlohmann::json j);

// Whether redactSecrets would change anything in `j` (a key naming a secret, with a value).
bool holdsSecrets(const nlohmann::json& j);

// Whether JSON text may hold a key naming a secret: false only when no stem of a secret word
// (pass, pwd, token, secret, hash, key, credential) appears in it in any case and it has no
// escape that could spell one. A cheap test that lets text without secrets be kept as it is,
// without a parse.
bool textMayNameSecrets(std::string_view text);

}  // namespace allot::api
