// What people expect of any command-line tool: --version, "did you mean" for a misspelt command,
// shell completion and a manual page written from the same definitions as --help.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "cli/cli_fixture.h"
#include "cli/command_hint.h"
#include "cli/json.h"
#include "common/build_info.h"

namespace allot::cli {
namespace {

class CliConventionsTest : public testing::CliFixture {
 protected:
  CliConventionsTest()
      : CliFixture(
            [](const testing::FakeRequest& req) {
              testing::FakeResponse r;
              r.status = 404;
              if (req.target == "/api/v1/hosts/gpu-01") {
                // As allotd shows a host with no task, handover or health check, plus a field
                // of a newer server.
                r.status = 200;
                r.body = R"({"name":"gpu-01","state":"online","admin_state":"available",
                  "admin_reason":null,"dedicated_to":null,"contour":"dev","pool":"shared",
                  "driver_version":null,"cuda_version":null,"task":null,"handover_to":null,
                  "health_checked_at":null,"fenced_since":null,"rack_position":"r1-u12",
                  "gpus":[]})";
              }
              if (req.target == "/api/v1/whoami") {
                r.status = 200;
                r.body = R"({"name":"alice","teams":{"nlp":"member","vision":"member"},
                  "platform_admin":false})";
              }
              if (req.target.rfind("/api/v1/jobs?", 0) == 0) {
                r.status = 200;
                r.body = R"([{"id":7,"name":"train","team":"vision","user":"alice",
                  "project":null,"state":"running","gpus":2,"host":"gpu-01"}])";
              }
              if (req.target == "/api/v1/sessions/5") {
                r.status = 200;
                r.body = R"({"id":5,"name":"jupyter","state":"queued","reason":
                  "no free GPUs: quota allows 1 GPU for team ml, but it is in use","url":null})";
              }
              return r;
            },
            "token") {}

  // Runs `script` in bash with the completion script loaded; what it prints.
  std::string bash(const std::string& script) {
    const std::string file = home_ + "/completion.bash";
    std::ofstream(file) << out_.str();
    const std::string cmd = "bash --noprofile --norc -c 'source " + file + "; " + script + "'";
    std::string result;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      while (size_t n = std::fread(buf, 1, sizeof buf, p)) result.append(buf, n);
      ::pclose(p);
    }
    return result;
  }
  // The words completed after typing `words` (the last one partial).
  std::string complete(const std::string& words) {
    return bash("COMP_WORDS=(" + words + "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _allot; " +
                "echo \"${COMPREPLY[*]}\"");
  }
};

TEST_F(CliConventionsTest, VersionIsTheBuildsOne) {
  EXPECT_EQ(run({"--version"}), 0);
  EXPECT_EQ(out_.str(), std::string("allot ") + allotVersion() + "\n");
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliConventionsTest, AMisspeltCommandGetsTheNearestOnes) {
  EXPECT_EQ(run({"jbo", "list"}), 2);
  EXPECT_EQ(err_.str(), "allot: no command `allot jbo`; did you mean `allot job`?\n");
  EXPECT_EQ(run({"-o", "json", "job", "lsit"}), 2);
  EXPECT_EQ(err_.str(), "allot: no command `allot job lsit`; did you mean `allot job list`?\n");
  // A command one level down, named without its group.
  EXPECT_EQ(run({"list"}), 2);
  EXPECT_NE(err_.str().find("did you mean `allot host list`, `allot image list`, `allot job list`"),
            std::string::npos)
      << err_.str();
  // A group alone lists its commands instead of "A subcommand is required".
  EXPECT_EQ(run({"job"}), 2);
  EXPECT_EQ(
      err_.str(),
      "allot: `allot job` needs a command: cancel, explain, hold, list, logs, release, requeue, "
      "show (see `allot job "
      "--help`)\n");
  EXPECT_EQ(run({"--server", "http://127.0.0.1:1", "xyzzy"}), 2);
  EXPECT_NE(err_.str().find("no command `allot xyzzy`; the commands of `allot` are: audit,"),
            std::string::npos)
      << err_.str();
  // A bad flag of a real command is still about the flag.
  EXPECT_EQ(run({"job", "list", "--bogus"}), 2);
  EXPECT_NE(err_.str().find("--bogus"), std::string::npos) << err_.str();
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliConventionsTest, HostShowPrintsNoRawNulls) {
  ASSERT_EQ(run({"host", "show", "gpu-01"}), 0) << err_.str();
  EXPECT_EQ(out_.str().find("null"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("pool"), std::string::npos) << out_.str();
  // A field this CLI does not know yet still shows, in words.
  EXPECT_NE(out_.str().find("rack position"), std::string::npos) << out_.str();
}

TEST_F(CliConventionsTest, OpeningAQueuedSessionSaysWhyItWaits) {
  EXPECT_EQ(run({"session", "open", "5", "--no-browser", "--wait", "0s"}), 1);
  EXPECT_EQ(err_.str(),
            "session 5 is queued: no free GPUs: quota allows 1 GPU for team ml, but it is in use\n"
            "allot: session 5 is still queued after 0s: no free GPUs: quota allows 1 GPU for team "
            "ml, but it is in use\n");
}

// A user in several teams names one once: ALLOT_TEAM, `allot config set team`, or
// `allot login --team`; commands that act for a team then send it.
TEST_F(CliConventionsTest, ADefaultTeamIsSentByCommandsThatActForATeam) {
  auto teamSent = [&](std::vector<std::string> args) -> std::string {
    run(args);
    const auto reqs = server_.requests();
    if (reqs.empty() || reqs.back().method != "POST") return "(no request)";
    json body = json::parse(reqs.back().body);
    return body.contains("team") ? body["team"].get<std::string>() : "(none)";
  };
  EXPECT_EQ(teamSent({"run", "--", "true"}), "(none)") << "no default: the server decides";
  vars_["ALLOT_TEAM"] = "vision";
  EXPECT_EQ(teamSent({"run", "--", "true"}), "vision");
  EXPECT_EQ(teamSent({"run", "--team", "nlp", "--", "true"}), "nlp") << "the flag wins";
  EXPECT_EQ(teamSent({"session", "create"}), "vision");
  EXPECT_EQ(teamSent({"project", "create", "llm"}), "vision");
  vars_.erase("ALLOT_TEAM");

  // `allot config set team` checks the caller is in it, and saves it.
  EXPECT_EQ(run({"config", "set", "team", "cv"}), 1);
  EXPECT_EQ(err_.str(),
            "allot: team: you are not in team 'cv' (your teams: nlp, vision); nothing saved\n");
  ASSERT_EQ(run({"config", "set", "team", "nlp"}), 0) << err_.str();
  EXPECT_EQ(teamSent({"run", "--", "true"}), "nlp");
  ASSERT_EQ(run({"config", "show"}), 0);
  EXPECT_NE(out_.str().find("nlp (from the file)"), std::string::npos) << out_.str();
  vars_["ALLOT_TEAM"] = "vision";
  EXPECT_EQ(teamSent({"run", "--", "true"}), "vision") << "the environment overrides the file";
  vars_.erase("ALLOT_TEAM");
  ASSERT_EQ(run({"config", "unset", "team"}), 0);
  EXPECT_EQ(teamSent({"run", "--", "true"}), "(none)");
  EXPECT_EQ(run({"config", "set", "token", "x"}), 2) << "the token is login's";

  // `allot login --team` saves it; a login in several teams without one says how to set one.
  vars_.erase("ALLOT_TOKEN");
  EXPECT_EQ(run({"login", "--token", "token", "--team", "cv"}), 2);
  EXPECT_NE(err_.str().find("you are not in team 'cv'"), std::string::npos) << err_.str();
  ASSERT_EQ(run({"login", "--token", "token"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("You are in several teams (nlp, vision): name one with --team, or set "
                            "a default: allot config set team NAME"),
            std::string::npos)
      << out_.str();
  ASSERT_EQ(run({"login", "--token", "token", "--team", "vision"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("Default team: vision"), std::string::npos) << out_.str();
  EXPECT_EQ(teamSent({"run", "--", "true"}), "vision");
  ASSERT_EQ(run({"login", "--token", "token"}), 0) << "logging in again keeps it";
  EXPECT_EQ(teamSent({"run", "--", "true"}), "vision");
}

TEST_F(CliConventionsTest, JobListTakesSeveralStatesAndMineAndShowsTheTeam) {
  ASSERT_EQ(run({"job", "list", "--state", "queued,running", "--mine"}), 0) << err_.str();
  const auto reqs = server_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().target, "/api/v1/jobs?state=queued%2Crunning&user=alice");
  EXPECT_NE(out_.str().find("TEAM"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("vision"), std::string::npos) << out_.str();
  EXPECT_EQ(run({"job", "list", "--state", "queued,sleeping"}), 2);
  EXPECT_NE(err_.str().find("unknown job state 'sleeping'"), std::string::npos) << err_.str();
  EXPECT_EQ(run({"job", "list", "--mine", "--user", "bob"}), 2);
}

TEST_F(CliConventionsTest, EditDistanceCountsASwapAsOne) {
  EXPECT_EQ(editDistance("lsit", "list"), 1u);
  EXPECT_EQ(editDistance("jbo", "job"), 1u);
  EXPECT_EQ(editDistance("", "job"), 3u);
  EXPECT_EQ(editDistance("session", "session"), 0u);
}

TEST_F(CliConventionsTest, BashCompletionCompletesCommandsThenTheirFlags) {
  ASSERT_EQ(run({"completion", "bash"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("complete -F _allot allot"), std::string::npos);
  EXPECT_EQ(complete("allot jo"), "job\n");
  EXPECT_EQ(complete("allot job li"), "list\n");
  EXPECT_EQ(complete("allot run --gpus 2 --queue"), "--queue-anyway\n");
  EXPECT_EQ(complete("allot --server http://x job list --sta"), "--state\n");
  EXPECT_EQ(complete("allot run -- pyth"), "\n") << "nothing after -- is allot's";
  ASSERT_EQ(run({"completion", "zsh"}), 0);
  EXPECT_EQ(out_.str().rfind("#compdef allot\n", 0), 0u);
  EXPECT_EQ(run({"completion", "fish"}), 2);
  EXPECT_NE(err_.str().find("fish not in {bash,zsh}"), std::string::npos) << err_.str();
}

TEST_F(CliConventionsTest, TheManualHasEveryCommandAndIsValidRoff) {
  ASSERT_EQ(run({"man"}), 0) << err_.str();
  const std::string page = out_.str();
  EXPECT_EQ(page.rfind(".TH ALLOT 1 ", 0), 0u);
  for (const char* part : {".SS \"allot job list\"", ".SS \"allot host drain\"",
                           "\\fB\\-\\-queue\\-anyway\\fR", ".SH GLOBAL FLAGS"})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  // groff, with every warning on, finds nothing to complain about.
  const std::string file = home_ + "/allot.1";
  std::ofstream(file) << page;
  std::string warnings;
  const std::string cmd = "groff -man -Tutf8 -ww -z " + file + " 2>&1";
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) warnings.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << warnings;
  }
  EXPECT_EQ(warnings, "");
}

}  // namespace
}  // namespace allot::cli
