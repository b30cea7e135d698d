// Keeps the published OpenAPI document true: every route the server registers is documented
// with its method, and every documented operation exists.

#include <gtest/gtest.h>

#include <boost/beast/http/verb.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "api/server.h"
#include "common/secrets.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::api {
namespace {

TEST(OpenApi, DocumentMatchesTheRouteTable) {
  initSecrets();
  auto dir =
      std::filesystem::temp_directory_path() / ("allot-openapi-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto store = store::SqliteStore::open((dir / "allot.db").string());
  ASSERT_TRUE(store.ok()) << store.status().toString();
  SystemClock clock;
  ServerConfig cfg;
  cfg.dataDir = dir.string();
  auto server = Server::create(cfg, clock, std::move(store).value());
  ASSERT_TRUE(server.ok()) << server.status().toString();

  auto doc = nlohmann::json::parse(openApiDocument());
  ASSERT_EQ(doc["openapi"], "3.0.3");
  std::set<std::string> documented;
  for (const auto& [path, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      documented.insert(method + " " + path);
      EXPECT_TRUE(op.contains("responses")) << method << " " << path;
    }
  }
  std::set<std::string> routed;
  for (const auto& r : (*server)->router().routes()) {
    std::string m(boost::beast::http::to_string(r.method));
    for (auto& c : m) c = static_cast<char>(std::tolower(c));
    routed.insert(m + " " + r.pattern);
  }
  for (const auto& r : routed) EXPECT_TRUE(documented.count(r)) << "undocumented route: " << r;
  // Served ahead of the router, on the raw connection (api/session_proxy.h).
  routed.insert("get /api/v1/sessions/{id}/ssh");
  for (const auto& d : documented)
    EXPECT_TRUE(routed.count(d)) << "documented but not served: " << d;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allot::api
