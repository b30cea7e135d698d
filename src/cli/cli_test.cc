// The whole CLI against a fake API server on a real loopback socket.

#include "cli/cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_fixture.h"

namespace allot::cli {
namespace {

using nlohmann::json;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::jsonReply;

const char* kToken = "tok-7.s3cr3t";

json queuedJob() {
  return {{"id", 42},
          {"name", "train"},
          {"team", "ml"},
          {"project", nullptr},
          {"user", "alice"},
          {"command", {"python", "train.py"}},
          {"env", {{"SEED", "1"}}},
          {"gpus", 8},
          {"gpu_models", {"H100"}},
          {"gpu_milli", 1000},
          {"priority", 0},
          {"preemptible", false},
          {"whole_host", false},
          {"preemptions", 0},
          {"evicting", false},
          {"state", "queued"},
          {"reason", "waiting for 8 free H100 GPUs"},
          {"host", nullptr},
          {"gpu_indices", json::array()},
          {"gpu_uuids", json::array()},
          {"exit_code", nullptr},
          {"signal", nullptr},
          {"cancel_requested", false},
          {"submitted_at", "2026-11-30T11:57:00Z"},
          {"started_at", nullptr},
          {"finished_at", nullptr},
          {"position", 2}};
}

FakeResponse api(const FakeRequest& r) {
  if (r.authorization != std::string("Bearer ") + kToken) {
    return jsonReply(401, R"({"error":{"code":"unauthenticated","message":"unknown token"}})");
  }
  if (r.target == "/api/v1/whoami") {
    return jsonReply(200, R"({"name":"alice","teams":{"ml":"member"},"platform_admin":false})");
  }
  if (r.target == "/api/v1/jobs?state=queued")
    return jsonReply(200, json::array({queuedJob()}).dump());
  if (r.target == "/api/v1/jobs/42") return jsonReply(200, queuedJob().dump());
  if (r.target == "/api/v1/jobs/44") {
    json j = queuedJob();
    j["id"] = 44;
    j["state"] = "running";
    j["gpus"] = 1;
    j["gpu_milli"] = 500;
    j["gpu_models"] = {"A100", "H100"};
    j["gpu_memory_mib"] = 10240;
    j["priority"] = 5;
    j["preemptible"] = true;
    j["max_runtime"] = "2h";
    j["min_cuda"] = "12.2";
    j["preemptions"] = 2;
    j["evicting"] = true;
    j["evicting_since"] = "2026-11-30T11:59:00Z";
    j["evicted_for"] = "reclaimed by team nlp for job 7";
    return jsonReply(200, j.dump());
  }
  // A job in an image, pulling; a team's image allow-list.
  if (r.target == "/api/v1/jobs/48") {
    json j = queuedJob();
    j["id"] = 48;
    j["state"] = "pulling";
    j["image"] = "registry:5000/ml/pytorch:2.3";
    j["image_digest"] = "sha256:" + std::string(64, 'd');
    j["image_min_cuda"] = "12.1";
    j["pull"] = {{"bytes", 1 << 20}, {"total", 3 << 20}};
    return jsonReply(200, j.dump());
  }
  if (r.target == "/api/v1/teams/ml/image-allow") {
    json body = r.method == "PUT" ? json::parse(r.body) : json{{"allow", json::array()}};
    return jsonReply(200, json{{"team", "ml"}, {"allow", body["allow"]}}.dump());
  }
  // Idle allocations: policies, events, the idle part of the usage report, an idle job.
  if (r.target.find("/idle-policy") != std::string::npos) {
    json p = {{"team", "ml"},       {"project", nullptr},   {"threshold_percent", 5},
              {"after", "30m"},     {"action", "notify"},   {"grace", "15m"},
              {"webhook", nullptr}, {"webhook_set", false}, {"source", "platform"}};
    if (r.method == "PUT") {
      json body = json::parse(r.body);
      for (const auto& [k, v] : body.items()) p[k] = v;
      p["source"] = "team";
    }
    if (r.method == "DELETE") p["source"] = "team";
    return jsonReply(200, p.dump());
  }
  if (r.target.rfind("/api/v1/events?", 0) == 0) {
    return jsonReply(200, R"([{"id":3,"at":"2026-11-30T11:58:00Z","kind":"allocation_idle",
      "team":"ml","project":null,"user":"alice","job":46,"hosts":["gpu-01"],
      "message":"job 46 (alice): GPUs under 5% for 30m","details":{}}])");
  }
  if (r.target == "/api/v1/usage?by=host") {
    return jsonReply(200, R"({"by":"host","from":"2026-11-30T10:00:00Z",
      "to":"2026-11-30T12:00:00Z","rows":[],"idle_allocations":[{"job":46,"team":"ml",
      "project":"nb","user":"alice","host":"gpu-01","gpus":2,"idle_since":"2026-11-30T11:28:00Z",
      "threshold":5,"reclaim_at":"2026-11-30T12:13:00Z"}]})");
  }
  if (r.target == "/api/v1/jobs/46") {
    json j = queuedJob();
    j["id"] = 46;
    j["state"] = "running";
    j["idle"] = {{"since", "2026-11-30T11:28:00Z"},
                 {"notified_at", "2026-11-30T11:58:00Z"},
                 {"reclaim_at", "2026-11-30T12:13:00Z"}};
    return jsonReply(200, j.dump());
  }
  if (r.target.rfind("/api/v1/usage?", 0) == 0) {
    if (r.target.find("team=other") != std::string::npos)
      return jsonReply(404, R"({"error":{"code":"not_found","message":"no team 'other'"}})");
    return jsonReply(200, R"({"by":"project","from":"2026-11-30T10:00:00Z",
      "to":"2026-11-30T12:00:00Z","idle_below_percent":5,"rows":[
      {"name":"ml/resnet","gpu_hours_allocated":12.5,"gpu_hours_measured":12,
       "gpu_hours_used":6.25,"efficiency":0.5,"idle_gpu_hours":3,"peak_gpus":2.5,"cost":31.25},
      {"name":"ml/a,b","gpu_hours_allocated":0.000277,"gpu_hours_measured":0,
       "gpu_hours_used":null,"efficiency":null,"idle_gpu_hours":null,"peak_gpus":1,
       "cost":null}]})");
  }
  if (r.method == "PUT" && r.target == "/api/v1/teams/ml/quota") {
    json body = json::parse(r.body);
    json q = {{"guaranteed", body.value("guaranteed", json::object())},
              {"borrow_limit", body.value("borrow_limit", json(nullptr))},
              {"lend_limit", body.value("lend_limit", json(nullptr))},
              {"weight", body.value("weight", 1.0)},
              {"lend_dedicated", body.value("lend_dedicated", false)}};
    json limits = json::object();
    const json asked = body.value("contour_limits", json::object());
    for (const auto& [contour, n] : asked.items()) {
      if (!n.is_null()) limits[contour] = n;
    }
    q["contour_limits"] = limits;
    return jsonReply(
        200, json({{"name", "ml"}, {"created_at", "2026-11-30T10:00:00Z"}, {"quota", q}}).dump());
  }
  if (r.target == "/api/v1/teams/ml/quota") {
    return jsonReply(200, R"({"team":"ml","guaranteed":{"A100":4,"any":2},"borrow_limit":null,
      "lend_limit":2,"weight":2.0,"lend_dedicated":false,
      "projects":[{"name":"resnet","guaranteed":{"A100":3}}],
      "status":{"guaranteed":6,"within":5,"borrowed":1,"lendable":1,"share":0.25}})");
  }
  if (r.method == "PUT" && r.target == "/api/v1/teams/ml/projects/resnet/quota") {
    json body = json::parse(r.body);
    return jsonReply(
        200, json({{"name", "resnet"}, {"team", "ml"}, {"guaranteed", body["guaranteed"]}}).dump());
  }
  if (r.method == "POST" && r.target == "/api/v1/upgrades") {
    // A finished upgrade at once, so that --wait needs no second look.
    json body = json::parse(r.body);
    return jsonReply(201, json({{"id", 3},
                                {"pool", body["pool"]},
                                {"profile", body["profile"]},
                                {"state", "stopped"},
                                {"stopped_at", "gpu-02"},
                                {"reason", "host gpu-02: exit code 3"},
                                {"hosts",
                                 {{{"host", "gpu-01"}, {"state", "done"}},
                                  {{"host", "gpu-02"}, {"state", "failed"}},
                                  {{"host", "gpu-03"}, {"state", "skipped"}}}}})
                              .dump());
  }
  if (r.method == "POST" && r.target == "/api/v1/hosts/gpu-01/drain") {
    json body = json::parse(r.body);
    return jsonReply(200, json({{"name", "gpu-01"},
                                {"admin_state", "draining"},
                                {"admin_reason", body.value("reason", json(nullptr))},
                                {"drain_deadline", "2026-11-30T12:30:00Z"},
                                {"drain_reason", body.value("reason", json(nullptr))}})
                              .dump());
  }
  if (r.target == "/api/v1/hosts/gpu-01/events") {
    return jsonReply(200, R"([{"id":1,"host":"gpu-01","at":"2026-11-30T11:00:00Z","by":"root",
      "from":"available","to":"draining","reason":"kernel update","output":null},
      {"id":2,"host":"gpu-01","at":"2026-11-30T11:05:00Z","by":"allotd","from":"draining",
      "to":"maintenance","reason":"kernel update","output":null}])");
  }
  if (r.method == "PUT" && r.target.rfind("/api/v1/hosts/gpu-01", 0) == 0) {
    json body = json::parse(r.body);
    json gpu = {{"index", 1}, {"model", "H100"}, {"dedicated_to", nullptr}, {"shared", false}};
    if (body.contains("dedicated_to")) gpu["dedicated_to"] = body["dedicated_to"];
    if (body.contains("shared")) gpu["shared"] = body["shared"];
    return jsonReply(200, json({{"name", "gpu-01"},
                                {"dedicated_to", body.value("team", json(nullptr))},
                                {"contour", body.value("contour", "dev")},
                                {"gpus", {gpu}}})
                              .dump());
  }
  if (r.target == "/api/v1/jobs/43") {
    json j = queuedJob();
    j["id"] = 43;
    j["state"] = "failed";
    j["exit_code"] = 3;
    j["reason"] = "exited with code 3";
    return jsonReply(200, j.dump());
  }
  if (r.method == "POST" && r.target == "/api/v1/jobs") {
    json body = json::parse(r.body);
    json j = queuedJob();
    j["id"] = body["command"][0] == "fail" ? 43 : 42;
    return jsonReply(201, j.dump());
  }
  if (r.target.rfind("/api/v1/jobs/43/logs", 0) == 0) {
    FakeResponse res;
    res.body = r.target.find("offset=0") != std::string::npos ? "epoch 1\n" : "";
    res.headers = {{"X-Allot-Log-Size", "8"}, {"X-Allot-Job-State", "failed"}};
    return res;
  }
  if (r.target == "/api/v1/hosts") {
    return jsonReply(200, R"([{"name":"gpu-01","state":"online","simulated":true,
      "gpu_provider":"simulated","cpus":64,"memory_mib":524288,
      "gpus":[{"index":0,"model":"H100"},{"index":1,"model":"H100"}],
      "agent_version":"0.1.0","cgroup":"v2","joined_at":"2026-11-30T10:00:00Z",
      "last_seen_at":"2026-11-30T11:59:58Z","admin_state":"draining",
      "driver_version":"535.104.05","cuda_version":"12.2","contour":"prod"}])");
  }
  if (r.method == "POST" && r.target == "/api/v1/users") {
    json body = json::parse(r.body);
    body["created_at"] = "2026-11-30T12:00:00Z";
    body["token"] = "tok-9.newsecret";
    return jsonReply(201, body.dump());
  }
  if (r.method == "POST" && r.target == "/api/v1/hosts/join-tokens") {
    json body = json::parse(r.body);
    return jsonReply(201, json({{"id", "jt-1"},
                                {"token", "jt-1.joinsecret"},
                                {"uses", body.value("uses", 1)},
                                {"expires_at", "2026-12-01T12:00:00Z"}})
                              .dump());
  }
  if (r.method == "GET" && r.target == "/api/v1/hosts/join-tokens") {
    return jsonReply(200, R"([{"id":"jt-1","created_by":"root","expires_at":"2026-12-01T12:00:00Z",
      "uses":3,"used":1,"uses_left":2,"revoked_at":null,"state":"active"}])");
  }
  if (r.method == "DELETE" && r.target == "/api/v1/hosts/join-tokens/jt-1") {
    return jsonReply(200, R"({"id":"jt-1","state":"revoked"})");
  }
  if (r.method == "POST" && r.target == "/api/v1/hosts/gpu-01/reset-credential") {
    return jsonReply(200, R"({"host":"gpu-01","credential_reset":true})");
  }
  if (r.method == "POST" && r.target == "/api/v1/leases") {
    json body = json::parse(r.body);
    body["id"] = 7;
    body["state"] = "requested";
    return jsonReply(201, body.dump());
  }
  if (r.method == "GET" && r.target == "/api/v1/leases") {
    return jsonReply(200, R"([{"id":7,"team":"nlp","state":"approved","hosts":["gpu-03"],
      "start":"2026-12-01T09:00:00Z","end":"2026-12-02T18:00:00Z","reason":"eval"}])");
  }
  if (r.method == "GET" && r.target == "/api/v1/leases/7") {
    return jsonReply(200, R"({"id":7,"team":"nlp","state":"active","hosts":["gpu-03","gpu-04"],
      "count":null,"gpu_model":null,"min_gpus":null,"start":"2026-11-30T09:00:00Z",
      "end":"2026-12-01T18:00:00Z","reason":"eval sprint","requested_by":"carol",
      "created_at":"2026-11-29T12:00:00Z","decided_by":"admin","decided_at":"2026-11-29T12:05:00Z",
      "decision":null,"started_at":"2026-11-30T09:00:02Z","ended_at":null,
      "skipped_hosts":["gpu-04: failed"],"priority_hint":"high"})");
  }
  if (r.method == "POST" && r.target == "/api/v1/leases/7/approve") {
    json err = {{"error",
                 {{"code", "failed_precondition"},
                  {"message",
                   "host gpu-03 is leased to team nlp from 2026-12-01T09:00:00Z to "
                   "2026-12-02T18:00:00Z (lease 6)"}}}};
    return jsonReply(409, err.dump());
  }
  if (r.method == "POST" && r.target == "/api/v1/profiles") {
    json body = json::parse(r.body);
    if (!body.contains("team")) body["team"] = nullptr;
    return jsonReply(201, body.dump());
  }
  if (r.method == "GET" && r.target == "/api/v1/profiles") {
    return jsonReply(200, R"([{"name":"jupyter","team":null,"description":"Jupyter",
      "command":["jupyter-server"],"defaults":{"gpus":0,"gpu_milli":1000},
      "storage":["scratch","local"]}])");
  }
  if (r.method == "POST" && r.target == "/api/v1/teams") {
    return jsonReply(409,
                     R"({"error":{"code":"already_exists","message":"team 'ml' already exists"}})");
  }
  if (r.method == "POST" && r.target == "/api/v1/ssh-keys") {
    return jsonReply(201, R"({"fingerprint":"SHA256:abc","type":"ssh-ed25519","comment":"me@box",
      "added_at":"2026-11-30T11:00:00Z"})");
  }
  if (r.method == "DELETE" && r.target.rfind("/api/v1/ssh-keys/", 0) == 0) {
    return jsonReply(200, R"({"fingerprint":"SHA256:a/b+c","type":"ssh-ed25519","comment":"",
      "added_at":"2026-11-30T11:00:00Z"})");
  }
  return jsonReply(404, R"({"error":{"code":"not_found","message":"no such route"}})");
}

class CliTest : public testing::CliFixture {
 protected:
  CliTest() : CliFixture(api, kToken) {}
};

TEST_F(CliTest, SshKeyAddSendsThePublicKeyAndNeverAPrivateOne) {
  const std::string pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF9k me@box\n";
  EXPECT_EQ(run({"ssh-key", "add", "-"}, pub), 0) << err_.str();
  EXPECT_NE(out_.str().find("Added SSH key SHA256:abc (ssh-ed25519, me@box)"), std::string::npos)
      << out_.str();
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(json::parse(server_.requests()[0].body)["key"], pub);

  EXPECT_EQ(run({"ssh-key", "add", "-"},
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE "
                "KEY-----\n"),
            1);
  EXPECT_NE(err_.str().find("PRIVATE key: never upload it"), std::string::npos) << err_.str();
  EXPECT_EQ(server_.requests().size(), 1u) << "the private key went to the server";

  EXPECT_EQ(run({"ssh-key", "add", home_ + "/no-such.pub"}), 1);
  EXPECT_NE(err_.str().find("cannot read"), std::string::npos) << err_.str();
}

TEST_F(CliTest, SshKeyRemoveEncodesTheFingerprintAsOnePathSegment) {
  EXPECT_EQ(run({"ssh-key", "remove", "SHA256:a/b+c", "--user", "bob"}), 0) << err_.str();
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(server_.requests()[0].target, "/api/v1/ssh-keys/SHA256%3Aa%2Fb%2Bc?user=bob");
  EXPECT_NE(out_.str().find("Removed SSH key SHA256:a/b+c"), std::string::npos) << out_.str();
}

TEST_F(CliTest, HelpWorks) {
  EXPECT_EQ(run({"--help"}), 0);
  EXPECT_NE(out_.str().find("run"), std::string::npos);
  EXPECT_EQ(run({"run", "--help"}), 0);
  EXPECT_NE(out_.str().find("--gpus"), std::string::npos);
}

TEST_F(CliTest, HostDrainSendsDeadlineAndReasonAndLogShowsTransitions) {
  EXPECT_EQ(run({"host", "drain", "gpu-01", "--deadline", "30m", "--reason", "kernel update"}), 0)
      << err_.str();
  auto reqs = server_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().target, "/api/v1/hosts/gpu-01/drain");
  EXPECT_EQ(json::parse(reqs.back().body),
            json({{"deadline", "30m"}, {"reason", "kernel update"}}));
  EXPECT_EQ(out_.str(),
            "Host gpu-01: draining (deadline 2026-11-30T12:30:00Z, in 30m): kernel update\n");

  // A bad duration is a usage error, and nothing is sent.
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"host", "drain", "gpu-01", "--deadline", "soon"}), 2);
  EXPECT_NE(err_.str().find("--deadline"), std::string::npos) << err_.str();
  EXPECT_EQ(server_.requests().size(), sent);

  EXPECT_EQ(run({"host", "log", "gpu-01"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("allotd"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("maintenance"), std::string::npos) << out_.str();

  EXPECT_EQ(run({"host", "list"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("ADMIN"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("draining"), std::string::npos) << out_.str();
}

TEST_F(CliTest, JobListResolvesRelativeTimesBeforeAsking) {
  // The test clock is 2026-11-30T12:00:00Z.
  run({"job", "list", "--since", "-2h", "--until", "2026-11-30T13:00:00+03:00"});
  auto reqs = server_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().target,
            "/api/v1/jobs?since=2026-11-30T10%3A00%3A00Z&until=2026-11-30T10%3A00%3A00Z");
}

TEST_F(CliTest, ReportUsageAsksForTheWindowAndWritesCsv) {
  // The test clock is 2026-11-30T12:00:00Z.
  EXPECT_EQ(run({"report", "usage", "--by", "project", "--from", "-2h", "--to",
                 "2026-11-30T15:00:00+03:00", "--team", "ml", "-o", "csv"}),
            0)
      << err_.str();
  auto reqs = server_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().target,
            "/api/v1/usage?by=project&from=2026-11-30T10%3A00%3A00Z&to=2026-11-30T12%3A00%3A00Z"
            "&team=ml");
  EXPECT_EQ(out_.str(),
            "name,gpu_hours_allocated,gpu_hours_measured,gpu_hours_used,efficiency,idle_gpu_hours,"
            "peak_gpus,cost\n"
            "ml/resnet,12.5,12,6.25,0.5,3,2.5,31.25\n"
            "\"ml/a,b\",0.000277,0,,,,1,\n");
}

TEST_F(CliTest, ReportUsageTableShowsEfficiencyAsPercentAndMissingTelemetryAsDashes) {
  EXPECT_EQ(run({"report", "usage", "--by", "project"}), 0) << err_.str();
  EXPECT_EQ(server_.requests().back().target, "/api/v1/usage?by=project");
  const std::string out = out_.str();
  EXPECT_NE(out.find("usage by project from 2026-11-30T10:00:00Z to 2026-11-30T12:00:00Z (idle: "
                     "under 5% utilisation)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("NAME       GPU-HOURS  USED  EFFICIENCY  IDLE  PEAK GPUS  COST"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ml/resnet  12.5       6.25  50%         3     2.5        31.25"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ml/a,b     0          -     -           -     1          -"),
            std::string::npos)
      << out;
  EXPECT_EQ(run({"report", "usage", "--by", "team", "-o", "json"}), 0);
  EXPECT_EQ(json::parse(out_.str()).at("rows").size(), 2u);
}

TEST_F(CliTest, ReportUsageErrorsAreOneLine) {
  EXPECT_EQ(run({"report", "usage", "--by", "color"}), 2);
  EXPECT_EQ(run({"report", "usage"}), 2);
  EXPECT_EQ(run({"report", "usage", "--by", "team", "--from", "yesterday-ish"}), 2);
  EXPECT_NE(err_.str().find("--from"), std::string::npos) << err_.str();
  EXPECT_EQ(run({"job", "list", "-o", "csv"}), 2);
  EXPECT_NE(err_.str().find("csv"), std::string::npos) << err_.str();
  EXPECT_TRUE(server_.requests().empty());
  EXPECT_EQ(run({"report", "usage", "--by", "team", "--team", "other"}), 1);
  EXPECT_EQ(err_.str(), "allot: no team 'other'\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CliTest, JobListRefusesABadTime) {
  EXPECT_EQ(run({"job", "list", "--since", "yesterday-ish"}), 2);
  EXPECT_NE(err_.str().find("--since"), std::string::npos) << err_.str();
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run({}), 2);
  EXPECT_EQ(run({"job", "list", "--state", "sleeping"}), 2);
  EXPECT_EQ(run({"run", "--gpus", "-1", "--", "x"}), 2);
  EXPECT_EQ(run({"job", "show", "abc"}), 2);
  EXPECT_EQ(err_.str(), "allot: 'abc' is not a job id (use e.g. 42 or j-42)\n");
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, CommandWithoutDashesGetsAHint) {
  EXPECT_EQ(run({"run", "--gpus", "1", "python", "-c", "print(1)"}), 2);
  EXPECT_NE(err_.str().find("put the job's command after `--`"), std::string::npos) << err_.str();
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, BadEnvEntryIsOneLineAndSendsNothing) {
  EXPECT_EQ(run({"run", "--env", "A=1", "--env", "OOPS", "--", "python", "x.py"}), 2);
  EXPECT_EQ(err_.str(), "allot: --env 'OOPS': expected KEY=VALUE\n");
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, RunSendsTheJobAndPrintsItsId) {
  EXPECT_EQ(run({"run",   "--gpus", "8",      "--gpu-model", "H100",     "--name", "train",
                 "--env", "SEED=1", "--cpus", "2",           "--memory", "16Gi",   "--team",
                 "ml",    "--",     "python", "train.py",    "--lr",     "3e-4"}),
            0);
  EXPECT_EQ(out_.str(), "j-42\n");
  json body = json::parse(server_.requests().at(0).body);
  EXPECT_EQ(body, json({{"command", {"python", "train.py", "--lr", "3e-4"}},
                        {"gpus", 8},
                        {"cpu_millis", 2000},
                        {"memory_mib", 16384},
                        {"gpu_models", {"H100"}},
                        {"name", "train"},
                        {"team", "ml"},
                        {"env", {{"SEED", "1"}}}}));
}

TEST_F(CliTest, RunSendsFractionsAndSchedulingFlags) {
  EXPECT_EQ(run({"run", "--gpus", "0.5", "--gpu-model", "A100,H100", "--gpu-memory", "10GiB",
                 "--priority", "-5", "--preemptible", "--max-runtime", "2h", "--min-driver",
                 "535.104", "--min-cuda", "12.2", "--", "serve"}),
            0);
  EXPECT_EQ(json::parse(server_.requests().at(0).body), json({{"command", {"serve"}},
                                                              {"gpus", 1},
                                                              {"gpu_milli", 500},
                                                              {"gpu_memory_mib", 10240},
                                                              {"max_runtime", "2h"},
                                                              {"gpu_models", {"A100", "H100"}},
                                                              {"priority", -5},
                                                              {"preemptible", true},
                                                              {"min_driver", "535.104"},
                                                              {"min_cuda", "12.2"}}));
}

TEST_F(CliTest, WholeHostLeavesGpusToTheScheduler) {
  EXPECT_EQ(run({"run", "--whole-host", "--", "train"}), 0);
  json body = json::parse(server_.requests().at(0).body);
  EXPECT_EQ(body["whole_host"], true);
  EXPECT_FALSE(body.contains("gpus"));
  EXPECT_EQ(run({"run", "--whole-host", "--gpus", "2", "--", "train"}), 2);
  EXPECT_EQ(err_.str(), "allot: --whole-host takes every GPU of one host; leave out --gpus\n");
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(CliTest, HostsAsksForAGangAndLogsPickARank) {
  EXPECT_EQ(run({"run", "--hosts", "2", "--gpus", "4", "--", "torchrun", "train.py"}), 0);
  json body = json::parse(server_.requests().at(0).body);
  EXPECT_EQ(body["hosts"], 2);
  EXPECT_EQ(body["gpus"], 4);
  EXPECT_EQ(run({"run", "--", "train"}), 0);
  EXPECT_FALSE(json::parse(server_.requests().at(1).body).contains("hosts"));
  EXPECT_EQ(run({"run", "--hosts", "0", "--", "train"}), 2);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(run({"job", "logs", "43", "--rank", "1"}), 0);
  EXPECT_NE(server_.requests().back().target.find("rank=1"), std::string::npos);
}

TEST_F(CliTest, BadSchedulingFlagsAreOneLineUsageErrors) {
  EXPECT_EQ(run({"run", "--gpus", "1.5", "--", "x"}), 2);
  EXPECT_EQ(err_.str(),
            "allot: --gpus '1.5': a fraction must be below 1 GPU (0.5 is half of one shared "
            "GPU)\n");
  EXPECT_EQ(run({"run", "--gpus", "two", "--", "x"}), 2);
  EXPECT_EQ(run({"run", "--max-runtime", "soon", "--", "x"}), 2);
  EXPECT_NE(err_.str().find("--max-runtime"), std::string::npos) << err_.str();
  EXPECT_EQ(run({"run", "--gpu-memory", "lots", "--", "x"}), 2);
  EXPECT_NE(err_.str().find("--gpu-memory 'lots'"), std::string::npos) << err_.str();
  std::string err = err_.str();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, JobShowPrintsSchedulingFieldsWhenSet) {
  EXPECT_EQ(run({"job", "show", "44"}), 0);
  std::string out = out_.str();
  for (const char* want :
       {"gpus:             0.5 (a fraction of one shared GPU)", "gpu model:        A100,H100",
        "gpu memory:       10 GiB", "priority:         5", "preemptible:      yes",
        "max runtime:      2h", "min cuda:         12.2", "preemptions:      2",
        "evicting:         yes, since 2026-11-30T11:59:00Z (1m ago)",
        "evicted for:      reclaimed by team nlp for job 7"}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
  // A plain job does not mention them.
  EXPECT_EQ(run({"job", "show", "42"}), 0);
  for (const char* absent : {"priority", "preemptible", "evicting", "preemptions", "max runtime"})
    EXPECT_EQ(out_.str().find(absent), std::string::npos) << absent << "\n" << out_.str();
}

TEST_F(CliTest, TeamQuotaSetSendsTheQuota) {
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--gpus", "A100=4", "--gpus", "H100=1,T4=0", "--any",
                 "2", "--borrow-limit", "none", "--lend-limit", "2", "--weight", "2.5",
                 "--lend-dedicated", "true"}),
            0);
  auto req = server_.requests().at(0);
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.target, "/api/v1/teams/ml/quota");
  EXPECT_EQ(json::parse(req.body),
            json({{"guaranteed", {{"A100", 4}, {"H100", 1}, {"T4", 0}, {"any", 2}}},
                  {"borrow_limit", nullptr},
                  {"lend_limit", 2},
                  {"weight", 2.5},
                  {"lend_dedicated", true}}));
  EXPECT_NE(out_.str().find("Set the quota of team ml"), std::string::npos) << out_.str();

  // Only what is given is sent: the server keeps the rest.
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--weight", "3"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(1).body), json({{"weight", 3.0}}));
}

TEST_F(CliTest, TeamIdlePolicySetSendsOnlyWhatIsGiven) {
  EXPECT_EQ(run({"team", "idle-policy", "set", "ml", "--threshold", "10", "--after", "1h",
                 "--action", "reclaim", "--grace", "5m", "--webhook", "http://hooks:8080/x"}),
            0)
      << err_.str();
  auto req = server_.requests().at(0);
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.target, "/api/v1/teams/ml/idle-policy");
  EXPECT_EQ(json::parse(req.body), json({{"threshold_percent", 10.0},
                                         {"after", "1h"},
                                         {"action", "reclaim"},
                                         {"grace", "5m"},
                                         {"webhook", "http://hooks:8080/x"}}));
  EXPECT_NE(out_.str().find("Set the idle policy of team ml: idle when all GPUs stay under 10% "
                            "for 1h; reclaim after a grace of 5m"),
            std::string::npos)
      << out_.str();

  EXPECT_EQ(run({"team", "idle-policy", "set", "ml", "--project", "nb", "--webhook", ""}), 0);
  EXPECT_EQ(server_.requests().at(1).target, "/api/v1/teams/ml/projects/nb/idle-policy");
  EXPECT_EQ(json::parse(server_.requests().at(1).body), json({{"webhook", ""}}));

  EXPECT_EQ(run({"team", "idle-policy", "set", "ml"}), 2);                         // a usage error
  EXPECT_EQ(run({"team", "idle-policy", "set", "ml", "--threshold", "lots"}), 2);  // a usage error
  EXPECT_EQ(run({"team", "idle-policy", "set", "ml", "--action", "explode"}), 2);  // a usage error
  EXPECT_EQ(server_.requests().size(), 2u);  // refused before sending

  EXPECT_EQ(run({"team", "idle-policy", "unset", "ml", "--project", "nb"}), 0);
  EXPECT_EQ(server_.requests().back().method, "DELETE");
  EXPECT_EQ(run({"team", "idle-policy", "show", "ml"}), 0);
  EXPECT_NE(out_.str().find("from:"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("platform"), std::string::npos) << out_.str();
}

TEST_F(CliTest, RunSendsTheImageAndJobShowPrintsItsDigestAndPull) {
  EXPECT_EQ(run({"run", "--image", "registry:5000/ml/pytorch:2.3", "--", "python", "t.py"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(0).body)["image"], "registry:5000/ml/pytorch:2.3");
  EXPECT_EQ(run({"job", "show", "48"}), 0) << err_.str();
  const std::string shown = out_.str();
  EXPECT_NE(shown.find("pulling"), std::string::npos) << shown;
  EXPECT_NE(shown.find("registry:5000/ml/pytorch:2.3"), std::string::npos) << shown;
  EXPECT_NE(shown.find("image digest:"), std::string::npos) << shown;
  EXPECT_NE(shown.find("sha256:dddd"), std::string::npos) << shown;
  EXPECT_NE(shown.find("pulled:"), std::string::npos) << shown;
  EXPECT_NE(shown.find("CUDA 12.1 (its NVIDIA_REQUIRE_CUDA)"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("image_digest"), std::string::npos) << shown;  // not shown twice, raw

  EXPECT_EQ(run({"team", "image-allow", "set", "ml", "registry:5000/ml/", "r.example.com/base"}),
            0);
  EXPECT_EQ(server_.requests().back().method, "PUT");
  EXPECT_EQ(json::parse(server_.requests().back().body),
            json({{"allow", {"registry:5000/ml/", "r.example.com/base"}}}));
  EXPECT_NE(out_.str().find("Team ml may run images under: registry:5000/ml/, r.example.com/base"),
            std::string::npos)
      << out_.str();
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"team", "image-allow", "set", "ml"}), 2);  // neither prefixes nor --none
  EXPECT_EQ(run({"team", "image-allow", "set", "ml", "x.y/", "--none"}), 2);
  EXPECT_EQ(server_.requests().size(), sent);
  EXPECT_EQ(run({"team", "image-allow", "set", "ml", "--none"}), 0);
  EXPECT_EQ(json::parse(server_.requests().back().body), json({{"allow", json::array()}}));
  EXPECT_NE(out_.str().find("none (jobs in images are refused)"), std::string::npos);
}

TEST_F(CliTest, EventsReportAndJobShowTellOfIdleAllocations) {
  EXPECT_EQ(run({"events", "--job", "j-46", "--kind", "allocation_idle"}), 0) << err_.str();
  EXPECT_EQ(server_.requests().back().target,
            "/api/v1/events?limit=100&job=46&kind=allocation_idle");
  EXPECT_NE(out_.str().find("allocation_idle"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("job 46 (alice): GPUs under 5% for 30m"), std::string::npos)
      << out_.str();

  EXPECT_EQ(run({"report", "usage", "--by", "host"}), 0) << err_.str();
  const std::string report = out_.str();
  EXPECT_NE(report.find("idle allocations now:"), std::string::npos) << report;
  EXPECT_NE(report.find("2026-11-30T11:28:00Z"), std::string::npos) << report;
  EXPECT_NE(report.find("5%"), std::string::npos) << report;
  // No idle allocations, no section.
  EXPECT_EQ(run({"report", "usage", "--by", "project"}), 0);
  EXPECT_EQ(out_.str().find("idle allocations"), std::string::npos) << out_.str();

  EXPECT_EQ(run({"job", "show", "46"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("GPUs idle since 2026-11-30T11:28:00Z"), std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("to be reclaimed at 2026-11-30T12:13:00Z"), std::string::npos)
      << out_.str();
}

TEST_F(CliTest, LeaseCreateSendsAbsoluteTimesAndListShowsACalendar) {
  // The test clock is 2026-11-30T12:00:00Z.
  EXPECT_EQ(run({"lease", "create", "--team", "nlp", "--host", "gpu-03", "--host", "gpu-04",
                 "--start", "+21h", "--end", "2026-12-02T18:00:00Z", "--reason", "eval"}),
            0)
      << err_.str();
  auto req = server_.requests().back();
  EXPECT_EQ(req.target, "/api/v1/leases");
  EXPECT_EQ(json::parse(req.body), json({{"team", "nlp"},
                                         {"hosts", {"gpu-03", "gpu-04"}},
                                         {"start", "2026-12-01T09:00:00Z"},
                                         {"end", "2026-12-02T18:00:00Z"},
                                         {"reason", "eval"}}));
  EXPECT_NE(out_.str().find("Created lease 7 (requested): team nlp, gpu-03,gpu-04"),
            std::string::npos)
      << out_.str();

  // Hosts and a count, or a bad time: one line, exit 2, nothing sent.
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"lease", "create", "--team", "nlp", "--host", "gpu-03", "--count", "2", "--start",
                 "+1h", "--end", "+2h"}),
            2);
  EXPECT_EQ(run({"lease", "create", "--team", "nlp", "--count", "2", "--start", "tomorrowish",
                 "--end", "+2h"}),
            2);
  const std::string err = err_.str();
  EXPECT_NE(err.find("--start"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(server_.requests().size(), sent);

  EXPECT_EQ(run({"lease", "list", "--calendar", "--days", "4"}), 0) << err_.str();
  const std::string cal = out_.str();
  EXPECT_NE(cal.find("11-30"), std::string::npos) << cal;
  EXPECT_NE(cal.find("12-03"), std::string::npos) << cal;
  // Free today, leased on the 1st and 2nd, free on the 3rd.
  EXPECT_NE(cal.find("gpu-03  .      7      7      ."), std::string::npos) << cal;

  // One lease, whole: who asked and decided, when it started, what was not handed over, and
  // fields this CLI does not know yet rather than nothing.
  EXPECT_EQ(run({"lease", "show", "7"}), 0) << err_.str();
  const std::string shown = out_.str();
  for (const char* part : {"state:", "active", "gpu-03,gpu-04", "2026-11-30T09:00:00Z (3h ago)",
                           "carol, 2026-11-29T12:00:00Z", "admin, 2026-11-29T12:05:00Z",
                           "gpu-04: failed", "priority hint:"})
    EXPECT_NE(shown.find(part), std::string::npos) << part << "\n" << shown;
  EXPECT_EQ(shown.find("null"), std::string::npos) << shown;
  EXPECT_EQ(run({"lease", "show", "seven"}), 2);
  EXPECT_NE(err_.str().find("'seven' is not a lease id"), std::string::npos) << err_.str();

  // A conflict comes back as one line naming it.
  EXPECT_EQ(run({"lease", "approve", "7"}), 1);
  EXPECT_NE(err_.str().find("host gpu-03 is leased to team nlp"), std::string::npos) << err_.str();
}

TEST_F(CliTest, ProfileCreateSendsTheProfileAndListShowsIt) {
  EXPECT_EQ(run({"profile",
                 "create",
                 "torch",
                 "--team",
                 "ml",
                 "--gpus",
                 "0.5",
                 "--max-gpus",
                 "4",
                 "--cpus",
                 "2",
                 "--memory",
                 "16Gi",
                 "--max-memory",
                 "64Gi",
                 "--storage",
                 "scratch,local",
                 "--idle-threshold",
                 "7.5",
                 "--idle-after",
                 "1h",
                 "--max-lifetime",
                 "12h",
                 "--env",
                 "VENV=/opt/torch",
                 "--",
                 "/opt/torch/bin/jupyter-server",
                 "--no-browser"}),
            0)
      << err_.str();
  auto req = server_.requests().back();
  EXPECT_EQ(req.target, "/api/v1/profiles");
  EXPECT_EQ(json::parse(req.body),
            json({{"name", "torch"},
                  {"team", "ml"},
                  {"command", {"/opt/torch/bin/jupyter-server", "--no-browser"}},
                  {"env", {{"VENV", "/opt/torch"}}},
                  {"defaults",
                   {{"gpus", 1}, {"gpu_milli", 500}, {"cpu_millis", 2000}, {"memory_mib", 16384}}},
                  {"maxima", {{"gpus", 4}, {"memory_mib", 65536}}},
                  {"storage", {"scratch", "local"}},
                  {"idle", {{"threshold_percent", 7.5}, {"after", "1h"}}},
                  {"max_lifetime", "12h"}}));
  EXPECT_NE(out_.str().find("Created profile torch (ml)."), std::string::npos) << out_.str();

  // A bad flag: one line naming it, exit 2, nothing sent.
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"profile", "create", "x", "--memory", "lots", "--", "sh"}), 2);
  EXPECT_NE(err_.str().find("--memory"), std::string::npos) << err_.str();
  EXPECT_EQ(server_.requests().size(), sent);

  EXPECT_EQ(run({"profile", "list"}), 0) << err_.str();
  EXPECT_NE(out_.str().find("jupyter"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("(platform)"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("scratch,local"), std::string::npos) << out_.str();
}

TEST_F(CliTest, TeamQuotaSetRefusesBadFlagsBeforeSending) {
  EXPECT_EQ(run({"team", "quota", "set", "ml"}), 2);
  EXPECT_NE(err_.str().find("nothing to set"), std::string::npos);
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--gpus", "A100"}), 2);
  EXPECT_EQ(err_.str(), "allot: --gpus 'A100': expected MODEL=N, e.g. A100=4\n");
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--borrow-limit", "lots"}), 2);
  EXPECT_EQ(err_.str(), "allot: --borrow-limit 'lots': expected a number of GPUs or 'unlimited'\n");
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--weight", "heavy"}), 2);
  EXPECT_EQ(run({"team", "quota", "set", "ml", "--lend-dedicated", "maybe"}), 2);
  EXPECT_TRUE(server_.requests().empty());
  // The server's refusal is one line too.
  EXPECT_EQ(run({"team", "quota", "set", "other", "--weight", "2"}), 1);
  EXPECT_EQ(err_.str(), "allot: no such route\n");
}

TEST_F(CliTest, TeamQuotaShowPrintsSettingsUseAndSplit) {
  EXPECT_EQ(run({"team", "quota", "show", "ml"}), 0);
  std::string out = out_.str();
  for (const char* want :
       {"guaranteed:     4x A100, 2x any model\n", "borrow limit:   unlimited\n",
        "lend limit:     2\n", "weight:         2\n", "lend dedicated: no\n",
        "in use:         5 within guarantee, 1 borrowed\n", "lendable now:   1\n",
        "fair share:     0.25 (GPUs it holds now", "resnet   3x A100\n"}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
}

TEST_F(CliTest, ProjectQuotaSetSendsTheSplit) {
  EXPECT_EQ(run({"project", "quota", "set", "resnet", "--team", "ml", "--gpus", "A100=2"}), 0);
  auto req = server_.requests().at(0);
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.target, "/api/v1/teams/ml/projects/resnet/quota");
  EXPECT_EQ(json::parse(req.body), json({{"guaranteed", {{"A100", 2}}}}));
  EXPECT_NE(out_.str().find("2x A100 guaranteed"), std::string::npos) << out_.str();
  EXPECT_EQ(run({"project", "quota", "set", "resnet", "--gpus", "A100=2"}), 2);  // --team
}

TEST_F(CliTest, HostDedicationAndGpuSettings) {
  EXPECT_EQ(run({"host", "dedicate", "gpu-01", "--team", "ml"}), 0);
  EXPECT_EQ(server_.requests().at(0).target, "/api/v1/hosts/gpu-01/dedication");
  EXPECT_EQ(json::parse(server_.requests().at(0).body), json({{"team", "ml"}}));
  EXPECT_NE(out_.str().find("dedicated to team ml"), std::string::npos) << out_.str();
  EXPECT_EQ(run({"host", "undedicate", "gpu-01"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(1).body), json({{"team", nullptr}}));

  EXPECT_EQ(run({"host", "gpu", "gpu-01", "1", "--dedicate", "ml", "--shared"}), 0);
  EXPECT_EQ(server_.requests().at(2).method, "PUT");
  EXPECT_EQ(server_.requests().at(2).target, "/api/v1/hosts/gpu-01/gpus/1");
  EXPECT_EQ(json::parse(server_.requests().at(2).body),
            json({{"dedicated_to", "ml"}, {"shared", true}}));
  EXPECT_EQ(out_.str(), "GPU 1 of host gpu-01: dedicated to team ml, shared\n");
  EXPECT_EQ(run({"host", "gpu", "gpu-01", "1", "--undedicate", "--exclusive"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(3).body),
            json({{"dedicated_to", nullptr}, {"shared", false}}));

  EXPECT_EQ(run({"host", "gpu", "gpu-01", "1"}), 2);
  EXPECT_NE(err_.str().find("nothing to set"), std::string::npos);
  EXPECT_EQ(run({"host", "gpu", "gpu-01", "1", "--shared", "--exclusive"}), 2);
  EXPECT_EQ(run({"host", "gpu", "gpu-01", "1", "--dedicate", "ml", "--undedicate"}), 2);
  EXPECT_EQ(run({"host", "dedicate", "gpu-01"}), 2);  // --team is required
  EXPECT_EQ(server_.requests().size(), 4u);
}

TEST_F(CliTest, ContoursForHostsJobsAndQuotas) {
  EXPECT_EQ(run({"host", "set-contour", "gpu-01", "prod"}), 0);
  EXPECT_EQ(server_.requests().at(0).method, "PUT");
  EXPECT_EQ(server_.requests().at(0).target, "/api/v1/hosts/gpu-01/contour");
  EXPECT_EQ(json::parse(server_.requests().at(0).body), json({{"contour", "prod"}}));
  EXPECT_EQ(out_.str(), "Host gpu-01 is in contour prod; it takes only work of that contour\n");
  EXPECT_EQ(run({"host", "set-contour", "gpu-01"}), 2);  // CONTOUR is required

  EXPECT_EQ(run({"run", "--contour", "test", "--", "serve"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(1).body),
            json({{"command", {"serve"}}, {"gpus", 0}, {"contour", "test"}}));

  EXPECT_EQ(run({"team", "quota", "set", "ml", "--contour-limit", "prod=4", "--contour-limit",
                 "test=none"}),
            0);
  EXPECT_EQ(json::parse(server_.requests().at(2).body),
            json({{"contour_limits", {{"prod", 4}, {"test", nullptr}}}}));
  EXPECT_NE(out_.str().find("contour limits prod 4"), std::string::npos) << out_.str();
  for (const char* bad : {"prod", "prod=", "=4", "prod=-1", "prod=lots"}) {
    EXPECT_EQ(run({"team", "quota", "set", "ml", "--contour-limit", bad}), 2) << bad;
    EXPECT_NE(err_.str().find("--contour-limit"), std::string::npos) << err_.str();
  }
  EXPECT_EQ(server_.requests().size(), 3u);

  EXPECT_EQ(run({"host", "list"}), 0);
  EXPECT_NE(out_.str().find("CONTOUR"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("prod"), std::string::npos) << out_.str();
}

TEST_F(CliTest, BadResourceLimitIsAUsageError) {
  EXPECT_EQ(run({"run", "--memory", "lots", "--", "x"}), 2);
  EXPECT_NE(err_.str().find("--memory 'lots'"), std::string::npos);
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CliTest, RunDefaultsToZeroGpus) {
  EXPECT_EQ(run({"run", "--", "nvidia-smi"}), 0);
  EXPECT_EQ(json::parse(server_.requests().at(0).body)["gpus"], 0);
}

TEST_F(CliTest, RunWaitStreamsOutputAndExitsWithTheJobsCode) {
  EXPECT_EQ(run({"run", "--wait", "--", "fail"}), 3);
  EXPECT_EQ(out_.str(), "epoch 1\n");
  EXPECT_NE(err_.str().find("job j-43 failed: exit code 3"), std::string::npos);
}

TEST_F(CliTest, JobListJsonIsTheApiArray) {
  EXPECT_EQ(run({"job", "list", "--state", "queued", "-o", "json"}), 0);
  EXPECT_EQ(json::parse(out_.str()), json::array({queuedJob()}));
}

TEST_F(CliTest, JobListTableShowsReasonAndRelativeTimes) {
  EXPECT_EQ(run({"job", "list", "--state", "queued"}), 0);
  std::string out = out_.str();
  EXPECT_EQ(
      out.substr(0, out.find('\n')),
      "ID    NAME   TEAM  USER   PROJECT  STATE   GPUS     HOST  SUBMITTED  DURATION  REASON");
  EXPECT_NE(
      out.find("j-42  train  ml    alice  -        queued  8x H100  -     3m ago     -         "
               "waiting for 8 free H100 GPUs"),
      std::string::npos)
      << out;
}

TEST_F(CliTest, JobShowPrintsEveryFieldWithPositionWhileQueued) {
  EXPECT_EQ(run({"job", "show", "j-42"}), 0);
  std::string out = out_.str();
  for (const char* want :
       {"queue position:   2", "reason:           waiting for 8 free H100 GPUs",
        "command:          python train.py", "env:              SEED=1",
        "submitted:        2026-11-30T11:57:00Z (3m ago)", "exit code:        -"}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
  EXPECT_EQ(server_.requests().at(0).target, "/api/v1/jobs/42");
}

TEST_F(CliTest, HostUpgradeSendsThePoolAndWaitSaysWhereItStopped) {
  EXPECT_EQ(run({"host", "upgrade", "--pool", "shared", "--hook", "driver-550", "--max-unavailable",
                 "2", "--drain-deadline", "30m", "--wait"}),
            1);
  EXPECT_EQ(json::parse(server_.requests().back().body), json({{"pool", "shared"},
                                                               {"profile", "driver-550"},
                                                               {"max_unavailable", 2},
                                                               {"drain_deadline", "30m"}}));
  EXPECT_NE(err_.str().find("stopped at gpu-02: host gpu-02: exit code 3"), std::string::npos)
      << err_.str();
  EXPECT_NE(out_.str().find("gpu-03"), std::string::npos) << out_.str();
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"host", "upgrade", "--pool", "shared", "--hook", "x", "--drain-deadline", "soon"}),
            2);
  EXPECT_EQ(run({"host", "upgrade", "--hook", "x"}), 2);  // --pool is required
  EXPECT_EQ(server_.requests().size(), sent) << "bad input sends nothing";
}

TEST_F(CliTest, HostListMarksSimulatedProviders) {
  EXPECT_EQ(run({"host", "list"}), 0);
  EXPECT_NE(out_.str().find("535.104.05"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("SIMULATED"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("2x H100"), std::string::npos);
  EXPECT_NE(out_.str().find("512 GiB"), std::string::npos);
}

TEST_F(CliTest, UserCreateShowsTheTokenOnceWithALoginLine) {
  EXPECT_EQ(run({"user", "create", "bob", "--team", "ml"}), 0);
  EXPECT_NE(out_.str().find("Token: tok-9.newsecret"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("will not be shown again"), std::string::npos);
  EXPECT_NE(out_.str().find("allot login --server " + server_.url() + " --token tok-9.newsecret"),
            std::string::npos);
  EXPECT_EQ(json::parse(server_.requests().at(0).body),
            json({{"name", "bob"}, {"team", "ml"}, {"role", "member"}, {"platform_admin", false}}));
  EXPECT_EQ(run({"user", "create", "carol"}), 2);  // a member needs a team
}

TEST_F(CliTest, JoinTokenPrintsTheAgentCommandLine) {
  EXPECT_EQ(run({"host", "join-token", "--ttl", "24h"}), 0);
  EXPECT_NE(
      out_.str().find("ALLOT_JOIN_TOKEN=jt-1.joinsecret allot-agent --server " + server_.url()),
      std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("(in 1d)"), std::string::npos);
  EXPECT_EQ(json::parse(server_.requests().at(0).body), json({{"ttl", "24h"}, {"uses", 1}}));
  EXPECT_NE(out_.str().find("single use"), std::string::npos);
  EXPECT_EQ(run({"host", "join-token", "--ttl", "soon"}), 2);
  EXPECT_EQ(run({"host", "join-token", "--uses", "0"}), 2);
  EXPECT_EQ(server_.requests().size(), 1u);  // usage errors send nothing
}

TEST_F(CliTest, JoinTokenUsesListRevokeAndResetCredential) {
  EXPECT_EQ(run({"host", "join-token", "--uses", "3"}), 0);
  EXPECT_EQ(json::parse(server_.requests().back().body).value("uses", 0), 3);
  EXPECT_NE(out_.str().find("3 joins"), std::string::npos) << out_.str();
  out_.str("");
  EXPECT_EQ(run({"host", "join-tokens"}), 0);
  EXPECT_NE(out_.str().find("2/3"), std::string::npos) << out_.str();
  EXPECT_EQ(out_.str().find("joinsecret"), std::string::npos);
  EXPECT_EQ(run({"host", "revoke-join-token", "jt-1"}), 0);
  EXPECT_EQ(server_.requests().back().method, "DELETE");
  EXPECT_EQ(run({"host", "reset-credential", "gpu-01"}), 0);
  EXPECT_EQ(server_.requests().back().target, "/api/v1/hosts/gpu-01/reset-credential");
  EXPECT_NE(out_.str().find("takes the host over"), std::string::npos) << out_.str();
}

TEST_F(CliTest, ApiErrorsPrintTheServersMessage) {
  EXPECT_EQ(run({"team", "create", "ml"}), 1);
  EXPECT_EQ(err_.str(), "allot: team 'ml' already exists\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CliTest, UnreachableServerIsOneLine) {
  int port = 0;
  {
    FakeServer gone([](const FakeRequest&) { return jsonReply(200, "{}"); });
    port = gone.port();
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(run({"--server", url, "whoami"}), 1);
  EXPECT_EQ(err_.str(), "allot: cannot reach server at " + url + ": Connection refused\n");
}

TEST_F(CliTest, AnUnreadableCaFileIsAOneLineError) {
  EXPECT_EQ(
      run({"--server", "https://allot.example.com", "--ca-file", "/nonexistent/ca.pem", "whoami"}),
      1);
  const std::string err = err_.str();
  EXPECT_NE(err.find("/nonexistent/ca.pem"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
}

TEST_F(CliTest, LoginVerifiesSavesPrivatelyAndNeverPrintsTheToken) {
  vars_.erase("ALLOT_TOKEN");
  vars_.erase("ALLOT_SERVER");
  EXPECT_EQ(run({"login", "--server", server_.url(), "--token", kToken}), 0);
  EXPECT_EQ(out_.str().find(kToken), std::string::npos);
  std::string path = home_ + "/.config/allot/config.json";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Later commands use the saved server and token.
  EXPECT_EQ(run({"whoami"}), 0);
  EXPECT_NE(out_.str().find("alice"), std::string::npos);
  EXPECT_NE(out_.str().find("ml: member"), std::string::npos) << out_.str();
  EXPECT_EQ(out_.str().find(kToken), std::string::npos);
  EXPECT_EQ(run({"whoami", "-o", "json"}), 0);
  // Pretty, and in the order the API sent the fields.
  EXPECT_EQ(out_.str(),
            "{\n  \"name\": \"alice\",\n  \"teams\": {\n    \"ml\": \"member\"\n  },\n  "
            "\"platform_admin\": false\n}\n");
}

TEST_F(CliTest, LoginReadsTheTokenFromStdinAndRefusesABadOne) {
  vars_.erase("ALLOT_TOKEN");
  EXPECT_EQ(run({"login"}, "wrong-token\n"), 1);
  EXPECT_NE(err_.str().find("login failed, nothing saved: unknown token"), std::string::npos)
      << err_.str();
  EXPECT_FALSE(std::filesystem::exists(home_ + "/.config/allot/config.json"));
  EXPECT_EQ(run({"login"}, std::string(kToken) + "\n"), 0);
  EXPECT_TRUE(std::filesystem::exists(home_ + "/.config/allot/config.json"));
}

}  // namespace
}  // namespace allot::cli
