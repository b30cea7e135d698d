// The store's documents round-trip every field, and documents from older versions load with
// defaults (store/documents.h).

#include "store/documents.h"

#include <gtest/gtest.h>

#include "model/json.h"

namespace allot::store {
namespace {

using namespace model;  // NOLINT(google-build-using-namespace): the model's types under test

TEST(StoreDocuments, JobRoundTripsThroughStoreDoc) {
  Job j;
  j.id = 42;
  j.name = "train";
  j.team = "vision";
  j.command = {"python3", "train.py"};
  j.env = {{"A", "1"}};
  j.resources.gpus = 2;
  j.state = JobState::kRunning;
  j.ranks = {{.host = "gpu-07", .gpuIndices = {0, 1}}};
  j.exitCode = 3;
  j.submittedAt = 1000;
  Job back = jobFromStoreDoc(toStoreDoc(j)).value();
  EXPECT_EQ(back.id, 42);
  EXPECT_EQ(back.command, j.command);
  EXPECT_EQ(back.env, j.env);
  EXPECT_EQ(back.state, JobState::kRunning);
  ASSERT_EQ(back.ranks.size(), 1u) << "a single-host job's document holds its one rank";
  EXPECT_EQ(back.ranks[0].host, "gpu-07");
  EXPECT_EQ(back.ranks[0].gpuIndices, j.ranks[0].gpuIndices);
  EXPECT_EQ(back.exitCode, 3);
  EXPECT_FALSE(back.signal.has_value());
  EXPECT_EQ(back.submittedAt, 1000);
}

// storeDocText writes a job's document directly; it must be the text the store kept before,
// dump() of toStoreDoc(), byte for byte, whatever the job holds.
TEST(StoreDocuments, AJobsDocumentTextIsWhatItsJsonDumps) {
  auto dumped = [](const Job& j) {
    return toStoreDoc(j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  Job plain;
  plain.id = 1;
  plain.command = {"true"};
  Job full;
  full.id = 9'000'000'000;
  full.name = "tr\"ain\\ \xc3\xa9";
  full.team = "vision";
  full.project = "p1";
  full.user = "alice";
  full.command = {"sh", "-c", "echo \"x\"\n\t\x01 \xf0\x9f\x9a\x80"};
  full.env = {{"A", "1"}, {"K\"EY", "v\x1f"}, {"Z", "\xe2\x82\xac"}};
  full.resources.gpus = 2;
  full.resources.gpuModels = {"A100", "H100"};
  full.resources.gpuMilli = 500;
  full.resources.gpuMemoryMib = 20000;
  full.resources.cpuMillis = 4000;
  full.resources.memoryMib = 64000;
  full.resources.wholeHost = true;
  full.resources.minDriver = "550";
  full.resources.minCuda = "12.4";
  full.priority = -5;
  full.preemptible = true;
  full.maxRuntimeMs = 3'600'000;
  full.contour = "prod";
  full.state = JobState::kSucceeded;
  full.reason = "done";
  full.ranks = {{.host = "gpu-07", .gpuIndices = {0, 1}, .gpuUuids = {"GPU-a", "GPU-b"}}};
  full.exitCode = 0;
  full.signal = 9;
  full.cancelRequested = true;
  full.preemptions = 2;
  full.evicting = true;
  full.evictingSince = 77;
  full.evictedFor = "job 8";
  full.heldBy = "bob";
  full.requeueRequestedBy = "carol";
  full.dependencies = {{DependencyKind::kAfterOk, 5}, {DependencyKind::kAfterAny, 6}};
  full.workdir = "/home/alice";
  full.image = "registry:5000/ml/train:1";
  full.imageDigest = "sha256:abc";
  full.imageMinCuda = "12.0";
  full.arrayId = 40;
  full.arrayIndex = 3;
  full.arrayLimit = 2;
  full.submittedAt = 1000;
  full.scheduledAt = 1001;
  full.startedAt = 1002;
  full.finishedAt = 1003;
  Job invalid = plain;
  invalid.env = {{"BAD", "\xff\xfe"}};  // not UTF-8: replaced, as dump() does
  Job gang = full;
  gang.resources.hosts = 2;
  gang.ranks.push_back({.host = "gpu-08", .gpuIndices = {2}});
  for (const Job* j : {&plain, &full, &invalid, &gang}) {
    EXPECT_EQ(storeDocText(*j), dumped(*j)) << j->id;
    EXPECT_TRUE(jobFromStoreDoc(nlohmann::json::parse(storeDocText(*j))).ok());
  }
}

TEST(StoreDocuments, UserSshKeysRoundTripAndAreAbsentInOlderDocuments) {
  User u;
  u.name = "alice";
  u.sshKeys.push_back({"SHA256:abc", "ssh-ed25519", "AAAAC3Nz", "alice@laptop", 1234});
  u.sshKeys.push_back({"SHA256:def", "ssh-rsa", "AAAAB3Nz", "", 5678});
  User back = userFromStoreDoc(toStoreDoc(u)).value();
  ASSERT_EQ(back.sshKeys.size(), 2u);
  EXPECT_EQ(back.sshKeys[0].fingerprint, "SHA256:abc");
  EXPECT_EQ(back.sshKeys[0].blob, "AAAAC3Nz");
  EXPECT_EQ(back.sshKeys[0].comment, "alice@laptop");
  EXPECT_EQ(back.sshKeys[0].addedAt, 1234);
  EXPECT_EQ(back.sshKeys[1].type, "ssh-rsa");
  EXPECT_EQ(authorizedKeysLine(back.sshKeys[0]), "ssh-ed25519 AAAAC3Nz alice@laptop");
  EXPECT_EQ(authorizedKeysLine(back.sshKeys[1]), "ssh-rsa AAAAB3Nz");
  // The API shows what identifies a key, not the blob.
  EXPECT_FALSE(toJson(back.sshKeys[0]).contains("blob"));
  // A user stored before SSH keys existed loads with none.
  EXPECT_TRUE(
      userFromStoreDoc(json::parse(R"({"teams":{"ml":"member"}})")).value().sshKeys.empty());
}

TEST(StoreDocuments, HostRoundTrip) {
  Host h;
  h.name = "h1";
  h.simulated = true;
  h.gpus.push_back(Gpu{0, "GPU-1", 0, "A100", 81920, 0, "", "", "", false});
  Host back = hostFromStoreDoc(toStoreDoc(h)).value();
  EXPECT_EQ(back.name, "h1");
  EXPECT_TRUE(back.simulated);
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_EQ(back.gpus[0].model, "A100");
  EXPECT_EQ(back.admittedMemoryMib, 0);  // written without: the figures held count
  EXPECT_TRUE(back.admittedGpuMemoryMib.empty());
  // The sizes later hellos are measured against outlive a restart.
  h.admittedMemoryMib = 65536;
  h.admittedGpuMemoryMib = {{"GPU-1", 81920}};
  back = hostFromStoreDoc(toStoreDoc(h)).value();
  EXPECT_EQ(back.admittedMemoryMib, 65536);
  EXPECT_EQ(back.admittedGpuMemoryMib, h.admittedGpuMemoryMib);
}

TEST(StoreDocuments, HostAdminStateRoundTripsAndShowsInTheApi) {
  Host h;
  h.name = "h1";
  // A document written before admin states existed loads as available.
  Host old = hostFromStoreDoc(toStoreDoc(h)).value();
  EXPECT_EQ(old.adminState, AdminState::kAvailable);
  EXPECT_EQ(toJson(old)["admin_state"], "available");
  EXPECT_FALSE(toJson(old).contains("drain_deadline"));

  h.adminState = AdminState::kDraining;
  h.adminReason = "kernel update";
  h.drainDeadline = 1'764'505'800'000;  // 2025-11-30T12:30:00Z
  Host back = hostFromStoreDoc(toStoreDoc(h)).value();
  EXPECT_EQ(back.adminState, AdminState::kDraining);
  EXPECT_EQ(back.adminReason, "kernel update");
  EXPECT_EQ(back.drainDeadline, h.drainDeadline);
  json out = toJson(back);
  EXPECT_EQ(out["admin_state"], "draining");
  EXPECT_EQ(out["drain_deadline"], "2025-11-30T12:30:00Z");
  EXPECT_EQ(out["drain_reason"], "kernel update");
  EXPECT_EQ(parseAdminState("retired"), AdminState::kRetired);
  EXPECT_FALSE(parseAdminState("drained").has_value());
}

TEST(StoreDocuments, SchedulingFieldsRoundTripThroughStoreDoc) {
  Job j;
  j.id = 7;
  j.resources.gpus = 1;
  j.resources.gpuModels = {"A100", "H100 80GB HBM3"};
  j.resources.gpuMilli = 250;
  j.resources.gpuMemoryMib = 10240;
  j.priority = -5;
  j.preemptible = true;
  j.resources.wholeHost = true;
  j.maxRuntimeMs = 7'200'000;
  j.resources.minDriver = "535.104";
  j.resources.minCuda = "12.2";
  j.preemptions = 2;
  j.evicting = true;
  j.evictingSince = 5000;
  j.evictedFor = "reclaimed by team ml for job 42";
  Job back = jobFromStoreDoc(toStoreDoc(j)).value();
  EXPECT_EQ(toStoreDoc(back), toStoreDoc(j));
  EXPECT_EQ(back.resources.gpuModels, j.resources.gpuModels);
  EXPECT_EQ(back.resources.gpuMilli, 250);
  EXPECT_EQ(back.evictedFor, j.evictedFor);

  auto api = toJson(j);
  EXPECT_EQ(api["gpu_models"], json({"A100", "H100 80GB HBM3"}));
  EXPECT_EQ(api["max_runtime"], "2h");
  EXPECT_EQ(api["min_cuda"], "12.2");
  EXPECT_EQ(api["evicting_since"], "1970-01-01T00:00:05Z");
  EXPECT_FALSE(api.contains("gpu_model"));
}

TEST(StoreDocuments, AJobKeepsItsImageAndTheDigestItsHostResolved) {
  Job j;
  j.id = 8;
  j.state = JobState::kPulling;
  j.image = "127.0.0.1:5000/ml/base:1";
  j.imageDigest = "sha256:" + std::string(64, 'c');
  Job back = jobFromStoreDoc(toStoreDoc(j)).value();
  EXPECT_EQ(back.image, j.image);
  EXPECT_EQ(back.imageDigest, j.imageDigest);
  EXPECT_EQ(back.state, JobState::kPulling);
  auto api = toJson(j);
  EXPECT_EQ(api["image"], j.image);
  EXPECT_EQ(api["image_digest"], j.imageDigest);
  EXPECT_EQ(api["state"], "pulling");
  // A job on the host says so with nulls, and its document carries neither field.
  Job plain;
  plain.id = 9;
  EXPECT_TRUE(toJson(plain)["image"].is_null());
  EXPECT_FALSE(toStoreDoc(plain).contains("image"));
}

TEST(StoreDocuments, JobDocumentsFromBeforeSchedulingFieldsLoadWithDefaults) {
  json old = {{"id", 3}, {"gpus", 2}, {"gpu_model", "H100"}, {"state", "queued"}};
  Job j = jobFromStoreDoc(old).value();
  EXPECT_EQ(j.resources.gpuModels, std::vector<std::string>{"H100"});
  EXPECT_EQ(j.resources.gpuMilli, 1000);
  EXPECT_EQ(j.priority, 0);
  EXPECT_FALSE(j.preemptible);
  EXPECT_EQ(j.maxRuntimeMs, 0);
  EXPECT_TRUE(jobFromStoreDoc({{"id", 4}, {"gpu_model", ""}}).value().resources.gpuModels.empty());
  auto api = toJson(j);
  EXPECT_TRUE(api["max_runtime"].is_null());
  EXPECT_TRUE(api["min_driver"].is_null());
}

TEST(StoreDocuments, TeamQuotaRoundTripsAndShowsAnyModelAsAny) {
  Team t;
  t.name = "ml";
  t.createdAt = 10;
  t.quota.guaranteed = {{"A100", 4}, {"", 2}};
  t.quota.borrowLimit = 3;
  t.quota.weight = 2.5;
  t.lendDedicated = true;
  t.usageGpuSeconds = 1234.5;
  t.usageAt = 99;
  Team back = teamFromStoreDoc(toStoreDoc(t)).value();
  EXPECT_EQ(back.name, "ml");
  EXPECT_EQ(back.createdAt, 10);
  EXPECT_EQ(back.quota.guaranteed, t.quota.guaranteed);
  EXPECT_EQ(back.quota.borrowLimit, 3);
  EXPECT_EQ(back.quota.lendLimit, -1);
  EXPECT_EQ(back.quota.weight, 2.5);
  EXPECT_TRUE(back.lendDedicated);
  EXPECT_EQ(back.usageGpuSeconds, 1234.5);
  EXPECT_EQ(back.usageAt, 99);

  auto q = toJson(t)["quota"];
  EXPECT_EQ(q["guaranteed"], json({{"A100", 4}, {"any", 2}}));
  EXPECT_EQ(q["borrow_limit"], 3);
  EXPECT_TRUE(q["lend_limit"].is_null());

  Team old = teamFromStoreDoc(json::object()).value();  // a team stored before quotas
  EXPECT_TRUE(old.quota.guaranteed.empty());
  EXPECT_EQ(old.quota.borrowLimit, -1);
  EXPECT_EQ(old.quota.weight, 1.0);
}

TEST(StoreDocuments, IdlePoliciesRoundTripAndAreAbsentInOlderDocuments) {
  Team t;
  t.name = "ml";
  IdlePolicy pol;
  pol.thresholdPct = 12.5;
  pol.afterMs = 60'000;
  pol.action = IdleAction::kReclaim;
  pol.graceMs = 0;
  pol.webhook = "http://hooks:8080/x";
  t.idlePolicy = pol;
  EXPECT_EQ(teamFromStoreDoc(toStoreDoc(t)).value().idlePolicy, pol);
  Project p;
  p.idlePolicy = pol;
  EXPECT_EQ(projectFromStoreDoc(toStoreDoc(p)).value().idlePolicy, pol);
  EXPECT_FALSE(teamFromStoreDoc(json::object()).value().idlePolicy);
  EXPECT_FALSE(projectFromStoreDoc(json::object()).value().idlePolicy);
}

TEST(StoreDocuments, ProjectSplitAndHostDedicationRoundTrip) {
  Project p{"resnet", "ml", 5, {{"A100", 2}, {"", 1}}, std::nullopt};
  Project back = projectFromStoreDoc(toStoreDoc(p)).value();
  EXPECT_EQ(back.guaranteed, p.guaranteed);
  EXPECT_EQ(back.team, "ml");
  EXPECT_EQ(toJson(p)["guaranteed"], json({{"A100", 2}, {"any", 1}}));

  Host h;
  h.name = "h1";
  h.dedicatedTo = "ml";
  h.gpus.push_back(Gpu{0, "GPU-1", 0, "A100", 81920, 0, "", "", "", false});
  h.gpus.push_back(Gpu{1, "GPU-2", 1, "A100", 81920, 0, "", "", "", false});
  h.gpus[0].dedicatedTo = "ml";
  h.gpus[1].shared = true;
  Host hb = hostFromStoreDoc(toStoreDoc(h)).value();
  EXPECT_EQ(hb.dedicatedTo, "ml");
  EXPECT_EQ(hb.gpus[0].dedicatedTo, "ml");
  EXPECT_FALSE(hb.gpus[0].shared);
  EXPECT_TRUE(hb.gpus[1].shared);
  EXPECT_EQ(toJson(h)["dedicated_to"], "ml");
  EXPECT_TRUE(toJson(h)["gpus"][1]["dedicated_to"].is_null());
  EXPECT_TRUE(hostFromStoreDoc({{"name", "old"}}).value().dedicatedTo.empty());
}

TEST(StoreDocuments, ALeaseKeepsWhereItsHostsGoBackAndAnOldOneSendsThemToThePool) {
  model::Lease l;
  l.id = 3;
  l.team = "ml";
  l.hosts = {"gpu-01", "gpu-02"};
  l.claimed = l.hosts;
  l.dedicatedBefore = {{"gpu-01", ""}, {"gpu-02", "ml"}};
  auto back = leaseFromStoreDoc(toStoreDoc(l));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->dedicatedBefore, l.dedicatedBefore);
  json old = toStoreDoc(l);
  old.erase("dedicated_before");  // stored before it was kept
  EXPECT_TRUE(leaseFromStoreDoc(old)->dedicatedBefore.empty());
}

TEST(StoreDocuments, ADocumentThatDoesNotDecodeIsAnErrorNotAnException) {
  const json bad[] = {json{{"id", "seven"}}, json{{"id", 7}, {"ranks", "two"}}, json::array(),
                      json(nullptr)};
  for (const json& doc : bad) {
    bool ok = true;
    EXPECT_NO_THROW(ok = jobFromStoreDoc(doc).ok()) << doc.dump();
    EXPECT_FALSE(ok) << doc.dump();
  }
  auto host = hostFromStoreDoc({{"name", "h1"}, {"task", {{"id", "one"}}}});
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), Code::kInternal);
  EXPECT_NE(host.status().message().find("stored document does not decode: host h1"),
            std::string::npos)
      << host.status().message();
  EXPECT_FALSE(teamFromStoreDoc(json("a team")).ok());
  EXPECT_FALSE(leaseFromStoreDoc(json::array()).ok());
  EXPECT_FALSE(profileFromStoreDoc(json{{"name", 5}}).ok());
}

}  // namespace
}  // namespace allot::store
