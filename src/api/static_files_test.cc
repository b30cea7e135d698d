// The console's static files on a temp dir: content types, the single-page app's fallback to
// index.html, gzip siblings, caching, security headers, and paths that try to leave the root.

#include "api/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace allot::api {
namespace {

namespace fs = std::filesystem;

std::string header(const ApiResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("allot-static-" + std::to_string(::getpid()));
    fs::create_directories(root_ / "assets");
    write("index.html", "<html>console</html>");
    write("assets/app-1a2b.js", "console.log(1)");
    write("assets/app-1a2b.js.gz", "GZIPPED");
    write("assets/app-1a2b.css", "body{}");
    write("favicon.ico", "ICO");
    write(".env", "SECRET");
    write("../allot-static-outside-" + std::to_string(::getpid()), "OUTSIDE");
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove(root_.parent_path() / ("allot-static-outside-" + std::to_string(::getpid())));
  }
  void write(const std::string& rel, const std::string& content) {
    std::ofstream(root_ / rel, std::ios::binary) << content;
  }
  fs::path root_;
};

TEST_F(StaticFilesTest, ServesFilesWithTheirTypeAndCaching) {
  StaticFiles files(root_.string());
  ApiResponse index = files.serve("/", "");
  EXPECT_EQ(index.status, http::status::ok);
  EXPECT_EQ(index.body, "<html>console</html>");
  EXPECT_EQ(index.contentType, "text/html; charset=utf-8");
  EXPECT_EQ(header(index, "Cache-Control"), "no-cache");
  EXPECT_NE(header(index, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(header(index, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(header(index, "Referrer-Policy"), "same-origin");

  ApiResponse css = files.serve("/assets/app-1a2b.css", "gzip");
  EXPECT_EQ(css.status, http::status::ok);
  EXPECT_EQ(css.contentType, "text/css; charset=utf-8");
  EXPECT_EQ(css.body, "body{}");
  EXPECT_EQ(header(css, "Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(header(css, "Content-Encoding"), "");
  EXPECT_EQ(files.serve("/favicon.ico", "").contentType, "image/x-icon");
}

TEST_F(StaticFilesTest, PicksTheGzipSiblingOnlyWhenTheClientTakesGzip) {
  StaticFiles files(root_.string());
  ApiResponse gz = files.serve("/assets/app-1a2b.js", "br, gzip, deflate");
  EXPECT_EQ(gz.body, "GZIPPED");
  EXPECT_EQ(header(gz, "Content-Encoding"), "gzip");
  EXPECT_EQ(header(gz, "Vary"), "Accept-Encoding");
  EXPECT_EQ(gz.contentType, "text/javascript; charset=utf-8");
  for (const char* accept : {"", "br", "gzip;q=0", "x-gzip2"}) {
    ApiResponse plain = files.serve("/assets/app-1a2b.js", accept);
    EXPECT_EQ(plain.body, "console.log(1)") << accept;
    EXPECT_EQ(header(plain, "Content-Encoding"), "") << accept;
    EXPECT_EQ(header(plain, "Vary"), "Accept-Encoding") << accept;
  }
}

TEST_F(StaticFilesTest, AppRoutesGetIndexHtmlAndMissingFilesAre404) {
  StaticFiles files(root_.string());
  for (const char* route : {"/queue", "/hosts/gpu-01", "/teams/ml/usage/"}) {
    ApiResponse r = files.serve(route, "");
    EXPECT_EQ(r.status, http::status::ok) << route;
    EXPECT_EQ(r.body, "<html>console</html>") << route;
    EXPECT_EQ(header(r, "Cache-Control"), "no-cache") << route;
  }
  EXPECT_EQ(files.serve("/assets/app-gone.js", "").status, http::status::not_found);
  EXPECT_EQ(files.serve("/robots.txt", "").status, http::status::not_found);
}

TEST_F(StaticFilesTest, RefusesPathsOutsideTheRoot) {
  StaticFiles files(root_.string());
  const std::string outside = "allot-static-outside-" + std::to_string(::getpid());
  const std::vector<std::string> paths = {"/../" + outside,
                                          "/assets/../../" + outside,
                                          "/./index.html",
                                          "/.env",
                                          "/assets\\..\\..\\" + outside,
                                          std::string("/index.html\0x", 13)};
  for (const std::string& path : paths) {
    ApiResponse r = files.serve(path, "");
    EXPECT_EQ(r.status, http::status::not_found) << path;
    EXPECT_EQ(r.body.find("OUTSIDE"), std::string::npos) << path;
    EXPECT_EQ(r.body.find("SECRET"), std::string::npos) << path;
  }
}

TEST_F(StaticFilesTest, WithoutAConsoleSaysHowToBuildIt) {
  StaticFiles none("");
  ApiResponse r = none.serve("/", "");
  EXPECT_EQ(r.status, http::status::not_found);
  EXPECT_NE(r.body.find("the web console is not built: run make"), std::string::npos);
}

TEST(StaticFilesPaths, OnlyGetAndHeadOutsideTheApiAreTheConsoles) {
  EXPECT_TRUE(StaticFiles::isConsoleRequest(http::verb::get, "/"));
  EXPECT_TRUE(StaticFiles::isConsoleRequest(http::verb::head, "/queue"));
  EXPECT_FALSE(StaticFiles::isConsoleRequest(http::verb::post, "/queue"));
  for (const char* p : {"/api/v1/nothing", "/metrics", "/healthz", "/sessions/x"})
    EXPECT_FALSE(StaticFiles::isConsoleRequest(http::verb::get, p)) << p;
}

TEST(StaticFilesPaths, DefaultDirIsTheInstalledThenTheBuiltConsole) {
  auto base = fs::temp_directory_path() / ("allot-webdir-" + std::to_string(::getpid()));
  fs::create_directories(base / "repo" / "build" / "bin");
  const std::string exe = (base / "repo" / "build" / "bin" / "allotd").string();
  EXPECT_EQ(defaultWebDir(exe), "");
  fs::create_directories(base / "repo" / "web" / "dist");
  EXPECT_EQ(defaultWebDir(exe), fs::canonical(base / "repo" / "web" / "dist").string());
  fs::create_directories(base / "repo" / "build" / "share" / "allot" / "web");
  EXPECT_EQ(defaultWebDir(exe),
            fs::canonical(base / "repo" / "build" / "share" / "allot" / "web").string());
  fs::remove_all(base);
}

}  // namespace
}  // namespace allot::api
