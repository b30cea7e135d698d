#pragma once
// CliFixture: the whole `allot` command line run in-process (runWith) against a FakeServer, the
// set-up the CLI's end-to-end tests share. $HOME is a fresh temporary directory (removed after
// the test), ALLOT_SERVER the fake server, ALLOT_TOKEN the token given; the clock stands at
// 2026-11-30T12:00:00Z. A test may change vars_; an empty one counts as unset. Test-only.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/fake_server.h"
#include "common/clock.h"
#include "common/time_format.h"

namespace allot::cli::testing {

class CliFixture : public ::testing::Test {
 protected:
  CliFixture(FakeServer::Handler api, std::string token)
      : server_(std::move(api)),
        clock_(*parseTime("2026-11-30T12:00:00Z", 0)),
        token_(std::move(token)) {}

  void SetUp() override {
    char tmpl[] = "/tmp/allot_cli_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    vars_ = {{"HOME", home_}, {"ALLOT_SERVER", server_.url()}, {"ALLOT_TOKEN", token_}};
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  // `allot ARGS...` with `stdinText` on stdin; its output lands in out_ and err_.
  int run(std::vector<std::string> args, std::string stdinText = "") {
    out_.str("");
    err_.str("");
    std::istringstream in(stdinText);
    auto env = [this](const std::string& name) -> std::optional<std::string> {
      auto it = vars_.find(name);
      if (it == vars_.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
    return runWith(args, env, in, out_, err_, clock_);
  }

  FakeServer server_;
  FakeClock clock_;
  std::string token_;
  std::string home_;
  std::map<std::string, std::string> vars_;
  std::ostringstream out_, err_;
};

}  // namespace allot::cli::testing
