#include "model/agent_protocol.h"

#include <gtest/gtest.h>

namespace allot::model {
namespace {

TEST(AgentProtocol, LogChunkCarriesBinaryBytes) {
  LogChunk c{7, 100, std::string("a\0b\xff\n", 5)};
  auto back = decodeLogChunk(encodeLogChunk(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->job, 7);
  EXPECT_EQ(back->offset, 100);
  EXPECT_EQ(back->data, c.data);
}

TEST(AgentProtocol, ActualJobRoundTrip) {
  ActualJob a;
  a.id = 3;
  a.state = ActualState::kExited;
  a.signal = 15;
  auto back = actualJobFromJson(toJson(a));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, ActualState::kExited);
  EXPECT_EQ(back->signal, 15);
  EXPECT_FALSE(back->exitCode.has_value());
}

TEST(AgentProtocol, AJobInAnImageIsPulledThenReportsTheDigestItResolvedTo) {
  DesiredJob d;
  d.id = 5;
  d.command = {"true"};
  d.image = "127.0.0.1:5000/ml/base:1";
  auto desired = desiredJobFromJson(toJson(d));
  ASSERT_TRUE(desired.ok());
  EXPECT_EQ(desired->image, d.image);
  EXPECT_FALSE(toJson(DesiredJob{}).contains("image"));  // a job on the host says nothing
  EXPECT_FALSE(desired->registryAuth);
  d.registryAuth = DesiredJob::RegistryAuth{"127.0.0.1:5000", "ml-puller", "s3cret"};
  auto withLogin = desiredJobFromJson(toJson(d));
  ASSERT_TRUE(withLogin.ok());
  ASSERT_TRUE(withLogin->registryAuth);
  EXPECT_EQ(withLogin->registryAuth->username, "ml-puller");
  EXPECT_EQ(withLogin->registryAuth->password, "s3cret");
  nlohmann::json broken = toJson(d);
  broken["registry_auth"].erase("password");
  EXPECT_FALSE(desiredJobFromJson(broken).ok());

  ActualJob a;
  a.id = 5;
  a.state = ActualState::kPulling;
  a.pullBytes = 1 << 20;
  a.pullTotal = 3 << 20;
  a.message = "waiting for another pull on this host to end";
  auto pulling = actualJobFromJson(toJson(a));
  ASSERT_TRUE(pulling.ok()) << pulling.status().message();
  EXPECT_EQ(pulling->state, ActualState::kPulling);
  EXPECT_EQ(pulling->pullBytes, a.pullBytes);
  EXPECT_EQ(pulling->pullTotal, a.pullTotal);
  EXPECT_EQ(pulling->message, a.message);

  a.state = ActualState::kRunning;
  a.imageDigest = "sha256:" + std::string(64, 'b');
  auto running = actualJobFromJson(toJson(a));
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->imageDigest, a.imageDigest);
  a.imageMinCuda = "12.1";
  EXPECT_EQ(actualJobFromJson(toJson(a))->imageMinCuda, "12.1");
  // What allotd stores and shows is checked: a digest that is not one, or negative byte counts,
  // refuse the report.
  for (auto bad :
       {nlohmann::json{{"image_digest", "sha256:xyz"}},
        nlohmann::json{{"image_digest", "<script>"}}, nlohmann::json{{"pull_bytes", -1}},
        nlohmann::json{{"pull_total", -5}}, nlohmann::json{{"image_min_cuda", "12.1; rm"}},
        nlohmann::json{{"image_min_cuda", 12}}}) {
    nlohmann::json j = toJson(a);
    j.update(bad);
    EXPECT_FALSE(actualJobFromJson(j).ok()) << bad.dump();
  }
}

TEST(AgentProtocol, DesiredJobCarriesItsOwnersIdentityOnlyWhenItHasOne) {
  DesiredJob d;
  d.id = 4;
  d.command = {"true"};
  auto none = desiredJobFromJson(toJson(d));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->runAs.has_value());
  d.runAs = RunAs{"alice", 200001, 200001, "red", 300000};
  auto back = desiredJobFromJson(toJson(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->runAs, d.runAs);
}

// encodeDesired writes its text directly; it must be what nlohmann::json would have written for
// the same message, byte for byte, whatever the job holds.
TEST(AgentProtocol, ADesiredStateIsWrittenAsNlohmannWouldWriteIt) {
  DesiredJob plain;
  plain.id = 1;
  plain.command = {"sleep", "600"};
  DesiredJob full;
  full.id = 9'000'000'000;
  full.command = {"sh", "-c", "echo \"quoted\" \\ back\tslash\n\x01 \xc3\xa9t\xc3\xa9 \xf0\x9f\x9a\x80"};
  full.env = {{"A", "1"}, {"EMPTY", ""}, {"K\"EY", "v\x1f"}, {"Z", "\xe2\x82\xac"}};
  full.gpuIndices = {0, 3};
  full.gpuUuids = {"GPU-a", "GPU-b"};
  full.gpuMinors = {0, 3};
  full.cpuMillis = 4000;
  full.memoryMib = 16384;
  full.cancel = true;
  full.graceMs = 30'000;
  full.logOffset = 123456789;
  full.chooseMasterPort = true;
  full.workdir = "/home/alice/x";
  full.image = "registry:5000/ml/train:1";
  full.registryAuth = DesiredJob::RegistryAuth{"registry:5000", "ml", "s3cret"};
  full.runAs = RunAs{"alice", 200001, 200002, "red", 300000};
  full.session = DesiredSession{"jupyter-server", "scratch", {"ssh-ed25519 AAAA alice"}, "alice",
                                "/shared"};
  DesiredJob deferred;
  deferred.id = 3;
  deferred.deferred = true;
  deferred.env = {{"ALLOT_SIM_GPU_UTIL", "50"}};
  HostTask task;
  task.id = 5;
  ImageCommands images;
  images.prunes = 2;
  images.prepulls = {"registry:5000/ml/a:1"};
  for (const auto& jobs : std::vector<std::vector<DesiredJob>>{{}, {plain}, {plain, full, deferred}}) {
    for (bool extras : {false, true}) {
      const std::optional<HostTask> t = extras ? std::optional<HostTask>(task) : std::nullopt;
      const ImageCommands i = extras ? images : ImageCommands{};
      const LogKeep keep = extras ? LogKeep{512, 1024} : LogKeep{};
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& d : jobs) arr.push_back(toJson(d));
      nlohmann::json expected{{"type", "desired"}, {"jobs", arr}, {"heartbeat_ms", 2000}};
      if (t) expected["task"] = toJson(*t);
      if (!i.empty()) expected["images"] = toJson(i);
      if (keep.tail > 0) expected["log_keep"] = {{"head", keep.head}, {"tail", keep.tail}};
      EXPECT_EQ(encodeDesired(jobs, 2000, t, i, keep), expected.dump());
    }
  }
}

TEST(AgentProtocol, ADesiredStateDecodesWholeOrNotAtAll) {
  DesiredJob a, b;
  a.id = 1;
  a.command = {"sleep", "600"};
  b.id = 2;
  b.deferred = true;
  auto msg = nlohmann::json::parse(encodeDesired({a, b}, 2000));
  // A field this agent does not know yet is ignored, at the top and in a job.
  msg["future_field"] = 7;
  msg["jobs"][0]["future_field"] = "x";
  auto state = decodeDesired(msg);
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->jobs.size(), 2u);
  EXPECT_EQ(state->jobs[0].command, a.command);
  EXPECT_TRUE(state->jobs[1].deferred);
  EXPECT_EQ(state->heartbeatMs, 2000);
  // One job entry that does not decode refuses the whole message: the agent keeps the last good
  // one rather than stop job 1 as "not wanted any more".
  msg["jobs"][1]["id"] = "two";
  auto refused = decodeDesired(msg);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("job entry 1"), std::string::npos);
  msg["jobs"] = "none";
  EXPECT_FALSE(decodeDesired(msg).ok());
}

TEST(AgentProtocol, ADesiredStateSaysWhatAllotdKeepsOfEachJobsOutput) {
  auto none = decodeDesired(nlohmann::json::parse(encodeDesired({}, 2000)));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->logKeep, LogKeep{}) << "no cap said: the agent ships all of it";
  auto msg = nlohmann::json::parse(encodeDesired({}, 2000, std::nullopt, {}, {512, 1024}));
  auto kept = decodeDesired(msg);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(kept->logKeep, (LogKeep{512, 1024}));
  for (const char* bad : {R"("all")", R"({"head": 1})", R"({"head": -1, "tail": 5})",
                          R"({"head": 1, "tail": 0})", R"({"head": "1", "tail": 5})"}) {
    msg["log_keep"] = nlohmann::json::parse(bad);
    auto refused = decodeDesired(msg);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("log_keep"), std::string::npos) << bad;
  }
}

TEST(AgentProtocol, HookCarriesTheAccountsToCreate) {
  HookSpec h{5, "default", "red", "script", "/bin/true", 1000, {}};
  h.accounts.push_back({"alice", 200001, 200001, {{"red", 300000}}});
  auto back = hookSpecFromJson(toJson(h));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->accounts, h.accounts);
}

TEST(AgentProtocol, ReportedInventoryKeepsTheAdminsGpuSettings) {
  Host h;
  h.dedicatedTo = "ml";
  h.gpus = {Gpu{0, "GPU-a", 0, "A100", 81920, 0, "535.104", "12.2", "", false},
            Gpu{1, "GPU-b", 1, "A100", 81920, 0, "535.104", "12.2", "", false}};
  h.gpus[0].dedicatedTo = "vision";
  h.gpus[1].shared = true;
  // The agent reports the same GPUs in another order plus a new one, and tries to set a
  // dedication itself.
  Inventory inv;
  inv.cpus = 32;
  inv.gpus = {Gpu{0, "GPU-b", 1, "A100", 81920, 0, "550.1", "12.4", "", false},
              Gpu{1, "GPU-a", 0, "A100", 81920, 0, "550.1", "12.4", "", false},
              Gpu{2, "GPU-c", 2, "A100", 81920, 0, "550.1", "12.4", "", false}};
  inv.gpus[2].dedicatedTo = "agent-says";
  inv.gpus[2].shared = true;
  applyInventory(h, inv);
  ASSERT_EQ(h.gpus.size(), 3u);
  EXPECT_EQ(h.gpus[0].uuid, "GPU-b");
  EXPECT_TRUE(h.gpus[0].shared);
  EXPECT_EQ(h.gpus[0].dedicatedTo, "");
  EXPECT_EQ(h.gpus[1].dedicatedTo, "vision");
  EXPECT_FALSE(h.gpus[1].shared);
  EXPECT_EQ(h.gpus[1].driverVersion, "550.1");  // hardware facts do come from the agent
  EXPECT_EQ(h.gpus[2].dedicatedTo, "");
  EXPECT_FALSE(h.gpus[2].shared);
  EXPECT_EQ(h.dedicatedTo, "ml");
  EXPECT_EQ(h.cpus, 32);
}

TEST(AgentProtocol, TelemetryRoundTripsKeepingAbsentReadingsAbsent) {
  Telemetry t;
  t.host = "gpu-07";
  t.at = 1'700'000'000'123;
  t.intervalMs = 5000;
  GpuSample full;
  full.index = 0;
  full.utilizationPct = 70;
  full.memoryUsedMib = 4096;
  full.temperatureC = 61;
  full.powerW = 312.25;
  full.smClockMhz = 1980;
  full.eccCorrected = 3;
  full.eccUncorrected = 0;
  full.pids = {4242, 4243};
  GpuSample sparse;  // a driver that gave memory only
  sparse.index = 1;
  sparse.memoryUsedMib = 0;
  t.gpus = {full, sparse};

  auto j = nlohmann::json::parse(toJson(t).dump());
  EXPECT_EQ(j["type"], "telemetry");
  EXPECT_FALSE(j["gpus"][1].contains("utilization_pct"));
  auto back = telemetryFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->host, "gpu-07");
  EXPECT_EQ(back->at, t.at);
  EXPECT_EQ(back->intervalMs, 5000);
  ASSERT_EQ(back->gpus.size(), 2u);
  const auto& f = back->gpus[0];
  EXPECT_EQ(f.utilizationPct, 70.0);
  EXPECT_EQ(f.memoryUsedMib, 4096);
  EXPECT_EQ(f.temperatureC, 61.0);
  EXPECT_EQ(f.powerW, 312.25);
  EXPECT_EQ(f.smClockMhz, 1980);
  EXPECT_EQ(f.eccCorrected, 3);
  EXPECT_EQ(f.eccUncorrected, 0);
  EXPECT_EQ(f.pids, (std::vector<int>{4242, 4243}));
  const auto& s = back->gpus[1];
  EXPECT_EQ(s.memoryUsedMib, 0);  // zero is a reading, not an absence
  EXPECT_FALSE(s.utilizationPct || s.temperatureC || s.powerW || s.smClockMhz || s.eccCorrected);
}

TEST(AgentProtocol, RejectsBadTelemetry) {
  auto good = toJson(Telemetry{"h", 1, 1000, {GpuSample{}}});
  ASSERT_TRUE(telemetryFromJson(good).ok());
  auto noHost = good;
  noHost.erase("host");
  EXPECT_FALSE(telemetryFromJson(noHost).ok());
  auto badInterval = good;
  badInterval["interval_ms"] = 0;
  EXPECT_FALSE(telemetryFromJson(badInterval).ok());
  auto badUtil = good;
  badUtil["gpus"][0]["utilization_pct"] = 140;
  EXPECT_FALSE(telemetryFromJson(badUtil).ok());
  auto badType = good;
  badType["gpus"][0]["power_w"] = "lots";
  EXPECT_FALSE(telemetryFromJson(badType).ok());
}

TEST(AgentProtocol, RejectsMalformed) {
  EXPECT_FALSE(actualJobFromJson(nlohmann::json{{"id", 1}, {"state", "dancing"}}).ok());
  EXPECT_FALSE(desiredJobFromJson(nlohmann::json{{"id", "x"}}).ok());
  EXPECT_FALSE(decodeLogChunk("no header").ok());
}

}  // namespace
TEST(AgentProtocol, AnInventorysAddressIsAnIpOrADnsNameAndNothingElse) {
  for (const char* good : {"10.0.0.5", "::1", "fe80::1", "gpu-a.lab.example", "gpu-a"})
    EXPECT_TRUE(isHostAddress(good)) << good;
  // It becomes a workload's MASTER_ADDR: no shell, URL or option syntax gets through.
  for (const char* bad : {"", "a b", "$(id)", "-oProxyCommand=x", "host:22", "a..b", "-a.b", "a-.b",
                          "http://x", "x/y", "a;b"})
    EXPECT_FALSE(isHostAddress(bad)) << bad;
  EXPECT_FALSE(isHostAddress(std::string(254, 'a'))) << "longer than a DNS name may be";
  Inventory inv;
  inv.hostname = "gpu-a";
  inv.address = "$(reboot)";
  EXPECT_FALSE(validateInventory(inv).ok());
  inv.address = "10.0.0.5";
  EXPECT_TRUE(validateInventory(inv).ok());
  auto back = inventoryFromJson(toJson(inv));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->address, "10.0.0.5");
}

}  // namespace allot::model
