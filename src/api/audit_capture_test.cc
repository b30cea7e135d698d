// Audit capture without a network: redaction, object names, where before/after come from, and
// that every mutating route of the real route table is audited and names its object.

#include "api/audit_capture.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <filesystem>
#include <random>
#include <set>
#include <utility>

#include "api/server.h"
#include "common/ascii.h"
#include "common/secrets.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::api {
namespace {

using nlohmann::json;

TEST(AuditRedaction, SecretsAreRedactedAtAnyDepthAndOtherFieldsKept) {
  json in = {{"name", "gpu-02"},
             {"join_token", "jt1_abc"},
             {"credential", "host_xyz"},
             {"host", {{"name", "gpu-02"}, {"token_hash", "ff00"}}},
             {"env", {{"HF_TOKEN", "hf_123"}, {"SEED", "1"}, {"apiKey", "k"}}},
             {"items", json::array({{{"password", "p"}, {"id", 3}}})},
             {"secret", nullptr},
             {"monkey", "banana"}};
  json out = redactSecrets(in);
  EXPECT_EQ(out["name"], "gpu-02");
  EXPECT_EQ(out["join_token"], "[redacted]");
  EXPECT_EQ(out["credential"], "[redacted]");
  EXPECT_EQ(out["host"]["name"], "gpu-02");
  EXPECT_EQ(out["host"]["token_hash"], "[redacted]");
  EXPECT_EQ(out["env"]["HF_TOKEN"], "[redacted]");
  EXPECT_EQ(out["env"]["SEED"], "1");
  EXPECT_EQ(out["env"]["apiKey"], "[redacted]");
  EXPECT_EQ(out["items"][0]["password"], "[redacted]");
  EXPECT_EQ(out["items"][0]["id"], 3);
  EXPECT_TRUE(out["secret"].is_null()) << "an absent secret says so";
  EXPECT_EQ(out["monkey"], "banana") << "a word, not a substring, names a secret";
}

// The fast paths that keep text as it is must never let a secret through: holdsSecrets agrees
// with redactSecrets, and textMayNameSecrets says yes to any text where a key could name one.
TEST(AuditRedaction, TheTestsThatSkipRedactionSeeEverySecretRedactionWouldRemove) {
  const std::vector<json> docs = {{{"env", {{"HF_TOKEN", "x"}}}},
                                  {{"apiKey", "k"}},
                                  {{"a", json::array({{{"passwd", 1}}})}},
                                  {{"Credentials", "c"}},
                                  {{"secret", nullptr}},
                                  {{"monkey", "banana"}},
                                  {{"command", {"python3", "train.py"}}, {"gpus", 1}}};
  for (const json& d : docs) {
    EXPECT_EQ(holdsSecrets(d), redactSecrets(d) != d) << d.dump();
    if (holdsSecrets(d)) {
      EXPECT_TRUE(textMayNameSecrets(d.dump())) << d.dump();
    }
  }
  EXPECT_FALSE(textMayNameSecrets(R"({"command":["true"],"gpus":1,"team":"ml"})"));
  EXPECT_TRUE(textMayNameSecrets(R"({"PassPhrase":"x"})"));
  EXPECT_TRUE(textMayNameSecrets(R"({"\u0074oken":"x"})")) << "an escape may spell a secret word";
  EXPECT_TRUE(namesSecret("join_token"));
  EXPECT_TRUE(namesSecret("some_very_long_prefix_word_apiKey"));
  EXPECT_FALSE(namesSecret("keyboardlayoutwithaverylongname"));
  EXPECT_FALSE(namesSecret(""));
}

// Secret names as environments and configurations spell them, each found at a word's edge: humps
// after capitals, digits, endings of single words, plurals (a review found these kept in the log).
TEST(AuditRedaction, SecretNamesAreFoundHoweverTheyAreWritten) {
  for (std::string_view key : {"PGPASSWORD",    "DBPassword",
                               "HFToken",       "token1",
                               "GITHUB_TOKEN2", "API_KEYS",
                               "apiKeys",       "passwords",
                               "MYSQL_PWD",     "clientSecret",
                               "client_secret", "AWS_SECRET_ACCESS_KEY",
                               "x-api-key",     "auth/token",
                               "Token",         "TOKEN",
                               "dbpassword",    "my.passwd",
                               "s3Credentials", "verylongprefixwithoutbreaksandthenapassword"}) {
    EXPECT_TRUE(namesSecret(key)) << key;
    EXPECT_TRUE(textMayNameSecrets(json{{key, "v"}}.dump())) << key;
  }
  for (std::string_view key :
       {"monkey", "keyboard", "rehash", "hashing", "OLDPWD", "tokenizer", "secretary", "passage",
        "passes", "CUDA_VISIBLE_DEVICES", "seed", "turnkey2", "MASTER_ADDR", "keystone", "LANG"}) {
    EXPECT_FALSE(namesSecret(key)) << key;
  }
  json env = {{"PGPASSWORD", "b"}, {"HFToken", "c"}, {"token1", "d"}, {"SEED", "1"}};
  json out = redactSecrets(env);
  EXPECT_EQ(out, (json{{"PGPASSWORD", "[redacted]"},
                       {"HFToken", "[redacted]"},
                       {"token1", "[redacted]"},
                       {"SEED", "1"}}));
}

// textMayNameSecrets skips most bytes by the first two letters of each stem; it must still say
// what the plain definition says: a backslash, or any stem in any case, anywhere, edges included.
TEST(AuditRedaction, TheSecretStemScanAgreesWithThePlainDefinitionOnRandomTexts) {
  auto plain = [](std::string_view text) {
    if (text.find('\\') != std::string_view::npos) return true;
    std::string lower(text);
    for (char& c : lower) c = asciiLower(c);
    for (std::string_view stem : {"pass", "token", "secret", "hash", "key", "credential", "pwd"}) {
      if (lower.find(stem) != std::string::npos) return true;
    }
    return false;
  };
  // Whole stems, near misses ("pas", "tokn", "ke") and filler, joined in random order and each
  // letter in a random case, so that stems start at every position, the last ones included.
  const std::vector<std::string_view> pieces = {
      "pass", "pas",        "token",     "tokn", "secret", "secre", "hash", "has", "key", "ke",
      "k",    "credential", "credentia", "pwd",  "pw",     "x",     "\\",   "\":", "_",   "p"};
  std::mt19937 rng(21);
  // 20,000 texts from `make`, each letter in a random case, checked against the plain definition;
  // between a quarter and three quarters of them should name a stem, so both answers are tried.
  auto agreeOnRandomTexts = [&](const char* kind, auto make) {
    int hits = 0;
    for (int round = 0; round < 20000; ++round) {
      std::string text = make();
      for (char& c : text) {
        if (c >= 'a' && c <= 'z' && rng() % 2 == 0) c = static_cast<char>(c - 'a' + 'A');
      }
      EXPECT_EQ(textMayNameSecrets(text), plain(text)) << text;
      hits += plain(text) ? 1 : 0;
    }
    EXPECT_GT(hits, 5000) << kind;
    EXPECT_LT(hits, 15000) << kind;
  };
  agreeOnRandomTexts("short texts", [&] {
    std::string text;
    for (int n = static_cast<int>(rng() % 4); n > 0; --n) text += pieces[rng() % pieces.size()];
    return text;
  });
  // One piece between pieces of JSON-like filler, so that the scan's blocks of sixteen meet stems
  // and near misses at every offset, across a block's edge and in its tail.
  const std::string filler = R"({"command":["python3","train.py"],"gpus":1,"preemptible":false})";
  agreeOnRandomTexts("long texts", [&] {
    std::string text = filler.substr(0, rng() % (filler.size() + 1));
    text += pieces[rng() % pieces.size()];
    text += filler.substr(0, rng() % 40);
    return text;
  });
  EXPECT_TRUE(textMayNameSecrets("KEY"));
  EXPECT_TRUE(textMayNameSecrets("xhash"));
  EXPECT_FALSE(textMayNameSecrets("ke"));
  EXPECT_FALSE(textMayNameSecrets("k"));
  EXPECT_FALSE(textMayNameSecrets(""));
}

TEST(AuditObject, NamesOneKindAndValuePerPathParameter) {
  EXPECT_EQ(auditObjectOf("/api/v1/hosts/{name}/drain", {{"name", "gpu-01"}}, nullptr),
            "host:gpu-01");
  EXPECT_EQ(auditObjectOf("/api/v1/teams/{team}/projects/{project}/quota",
                          {{"team", "ml"}, {"project", "vision"}}, nullptr),
            "team:ml/project:vision");
  EXPECT_EQ(
      auditObjectOf("/api/v1/hosts/{name}/gpus/{index}", {{"name", "a"}, {"index", "3"}}, nullptr),
      "host:a/gpu:3");
  EXPECT_EQ(auditObjectOf("/api/v1/jobs/{id}/cancel", {{"id", "42"}}, json{{"id", 43}}), "job:42");
}

TEST(AuditObject, ACreationIsNamedFromTheReply) {
  EXPECT_EQ(auditObjectOf("/api/v1/jobs", {}, json{{"id", 42}, {"name", "train"}}), "job:42");
  EXPECT_EQ(auditObjectOf("/api/v1/teams", {}, json{{"name", "ml"}}), "team:ml");
  EXPECT_EQ(auditObjectOf("/api/v1/projects", {}, json{{"name", "vision"}, {"team", "ml"}}),
            "team:ml/project:vision");
  EXPECT_EQ(auditObjectOf("/api/v1/hosts/join-tokens", {}, json{{"id", "jt7"}, {"token", "x"}}),
            "join-token:jt7");
  EXPECT_EQ(auditObjectOf("/api/v1/hosts/join", {},
                          json{{"host", {{"name", "gpu-02"}}}, {"credential", "c"}}),
            "host:gpu-02");
  EXPECT_EQ(auditObjectOf("/api/v1/ssh-keys", {}, json{{"fingerprint", "SHA256:ab/c"}}),
            "ssh-key:SHA256:ab/c");
  EXPECT_EQ(auditObjectOf("/api/v1/teams", {}, json("not an object")), "");
}

// One audited POST of `body` by alice, answered with `reply`, through AuditCapture as the server
// runs it; its entry.
std::optional<model::AuditEntry> auditedPost(const std::string& body, bool bodyIsJson,
                                             const ApiResponse& reply) {
  Router router;
  const Route route{http::verb::post, "/api/v1/things", true, nullptr};
  HttpRequest raw{http::verb::post, route.pattern, 11};
  raw.body() = body;
  ApiRequest req{raw};
  req.principal = control::Principal{};
  req.principal->name = "alice";
  req.bodyIsJson = bodyIsJson;
  boost::asio::io_context io;
  auto entry = boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<std::optional<model::AuditEntry>> {
        AuditCapture c =
            co_await AuditCapture::begin(router, route, req, route.pattern, "127.0.0.1", 0);
        std::optional<model::AuditEntry> e = co_await c.finish(router, reply);
        co_return e;
      },
      boost::asio::use_future);
  io.run();
  return entry.get();
}

// A job's body and reply are kept as sent unless their text may spell a secret word; where it
// may, they are parsed and redacted, whoever checked the body before (bodyIsJson) and however
// the key is spelled.
TEST(AuditCaptureFinish, ASecretInABodyOrReplyKeptAsTextIsStillRedacted) {
  const json job = {{"id", 7}, {"env", {{"HF_TOKEN", "s3cret"}}}};
  for (const bool checked : {true, false}) {
    auto e = auditedPost(R"({"env": {"HF_TOKEN": "s3cret"}})", checked,
                         ApiResponse::json(json(job), http::status::created));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->request.find("s3cret"), std::string::npos) << e->request;
    EXPECT_EQ(e->after.find("s3cret"), std::string::npos) << e->after;
    EXPECT_EQ(json::parse(e->after)["env"]["HF_TOKEN"], "[redacted]");
  }
  // An escape spells TOKEN in a body that was checked as JSON: still parsed, still redacted.
  auto escaped = auditedPost(R"({"env": {"HF_\u0054OKEN": "s3cret"}})", true,
                             ApiResponse::json(json{{"id", 8}}, http::status::created));
  ASSERT_TRUE(escaped.has_value());
  EXPECT_EQ(escaped->request.find("s3cret"), std::string::npos) << escaped->request;
  // A reply given only as text (no value): parsed, then redacted.
  ApiResponse textOnly{http::status::created, R"({"id":9,"api_key":"s3cret"})"};
  auto fromText = auditedPost(R"({"name": "x"})", true, textOnly);
  ASSERT_TRUE(fromText.has_value());
  EXPECT_EQ(fromText->after.find("s3cret"), std::string::npos) << fromText->after;
  // Nothing secret: kept word for word.
  auto plain =
      auditedPost(R"({"name": "x"})", true,
                  ApiResponse::json(json{{"id", 10}, {"name", "x"}}, http::status::created));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->request, R"({"name": "x"})");
  EXPECT_EQ(plain->after, R"({"id":10,"name":"x"})");
  EXPECT_EQ(plain->object, "thing:10");
}

class AuditRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initSecrets();
    dir_ = std::filesystem::temp_directory_path() /
           ("allot-audit-routes-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto store = store::SqliteStore::open((dir_ / "allot.db").string());
    ASSERT_TRUE(store.ok()) << store.status().toString();
    ServerConfig cfg;
    cfg.dataDir = dir_.string();
    auto server = Server::create(cfg, clock_, std::move(store).value());
    ASSERT_TRUE(server.ok()) << server.status().toString();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // An example path for a pattern: each parameter replaced by a plausible value.
  static std::string examplePath(const std::string& pattern) {
    std::string out;
    size_t i = 0;
    while (i < pattern.size()) {
      if (pattern[i] == '{') {
        size_t close = pattern.find('}', i);
        const std::string name = pattern.substr(i + 1, close - i - 1);
        out += name == "id" || name == "index" ? "1" : "x";
        i = close + 1;
      } else {
        out += pattern[i++];
      }
    }
    return out;
  }

  SystemClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
};

TEST_F(AuditRoutesTest, BeforeAndAfterComeFromTheNearestGetOnThePath) {
  const Router& router = server_->router();
  EXPECT_EQ(auditSnapshotPath(router, "/api/v1/hosts/gpu-01/drain", "/api/v1/hosts/{name}/drain"),
            "/api/v1/hosts/gpu-01");
  EXPECT_EQ(auditSnapshotPath(router, "/api/v1/teams/ml/quota", "/api/v1/teams/{team}/quota"),
            "/api/v1/teams/ml/quota");
  EXPECT_EQ(auditSnapshotPath(router, "/api/v1/jobs/42/cancel", "/api/v1/jobs/{id}/cancel"),
            "/api/v1/jobs/42");
  EXPECT_EQ(
      auditSnapshotPath(router, "/api/v1/hosts/a/gpus/3", "/api/v1/hosts/{name}/gpus/{index}"),
      "/api/v1/hosts/a");
  // A creation has nothing before it: the reply is what it made.
  EXPECT_EQ(auditSnapshotPath(router, "/api/v1/teams", "/api/v1/teams"), std::nullopt);
}

// Walks the real route table: every route that may change something is audited, every one with
// a path parameter names its object, and all but the few listed read before and after through a
// GET route. A new route that falls outside this fails here until it is thought about.
TEST_F(AuditRoutesTest, EveryMutatingRouteIsAuditedAndNamesWhatItChanges) {
  // No GET shows these on their own path: before is null, after is the reply.
  // No GET on their path: tokens, join tokens and SSH keys are read only in lists; the reply
  // (the revoked token, never its secret; the removed key) is the entry's `after`.
  const std::set<std::string> withoutSnapshot = {
      "PUT /api/v1/teams/{team}/projects/{project}/quota", "DELETE /api/v1/hosts/join-tokens/{id}",
      "DELETE /api/v1/tokens/{id}", "DELETE /api/v1/ssh-keys/{fingerprint}"};
  int mutating = 0;
  for (const Route& r : server_->router().routes()) {
    const std::string action = std::string(http::to_string(r.method)) + " " + r.pattern;
    if (r.method == http::verb::get) {
      EXPECT_FALSE(AuditCapture::audited(r)) << action;
      continue;
    }
    ++mutating;
    EXPECT_TRUE(AuditCapture::audited(r)) << action;
    const std::string path = examplePath(r.pattern);
    auto match = server_->router().match(r.method, path);
    ASSERT_NE(match.route, nullptr) << action;
    if (r.pattern.find('{') == std::string::npos) continue;  // a creation, named from its reply
    EXPECT_FALSE(auditObjectOf(r.pattern, match.params, nullptr).empty()) << action;
    auto snapshot = auditSnapshotPath(server_->router(), path, r.pattern);
    EXPECT_EQ(snapshot.has_value(), !withoutSnapshot.count(action)) << action;
  }
  EXPECT_GT(mutating, 20);
}

}  // namespace
}  // namespace allot::api
