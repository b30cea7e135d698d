// jobText writes a job's JSON straight to text: it must give the same bytes as the document
// (jobJson) dumped, for every kind of job it takes, and decline the ones it leaves to the document.

#include "api/job_text.h"

#include <gtest/gtest.h>

#include <random>

#include "api/http_types.h"
#include "api/job_reply.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using model::Job;
using model::JobState;

// What the routes send when they build the document: jobJson, plus array_tasks for an array's
// submission, dumped as ApiResponse does.
std::string documentText(Cluster& cluster, const Job& j, const api::JobTextOptions& o) {
  nlohmann::json doc = api::jobJson(cluster, j, o.maxSpecBytes);
  if (o.reason)
    doc["reason"] = o.reason->empty() ? nlohmann::json(nullptr) : nlohmann::json(*o.reason);
  if (o.arrayTasks > 0) {
    nlohmann::json ids = nlohmann::json::array();
    for (size_t t = 0; t < o.arrayTasks; ++t) ids.push_back(j.id + static_cast<int64_t>(t));
    doc["array_tasks"] = std::move(ids);
  }
  return api::ApiResponse::dumpBody(doc);
}

class JobTextTest : public ClusterTest {
 protected:
  std::mt19937_64 rng_{20261206};

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool coin() { return pick(0, 1) == 1; }
  // Text of every kind a job may carry: empty, plain, JSON's escapes and other control
  // characters, DEL, multi-byte UTF-8, and now and then bytes that are not UTF-8.
  std::string text() {
    // clang-format off
    static const std::vector<std::string> kPieces = {
        "", "train", " ", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x01", "\x1f", "\x7f",
        "\xc2\x80", "é", "日本", "😀", "\xf4\x8f\xbf\xbf", "a=b", "{}[]:,",
        // Not UTF-8 (kNotUtf8 of them, last): a cut sequence, a surrogate, past U+10FFFF,
        // overlong forms, a lone continuation byte, bytes UTF-8 never uses.
        "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80\xaf", "\xc0\x80",
        "\xf0\x80\x80\x80", "\x80", "\xf5\x80\x80\x80", "\xff"};
    // clang-format on
    constexpr size_t kNotUtf8 = 9;
    std::string s;
    const int64_t n = pick(0, 4);
    for (int64_t i = 0; i < n; ++i) {
      const auto& piece = kPieces[pick(0, static_cast<int64_t>(kPieces.size()) - 1)];
      // Bytes that are not UTF-8 only now and then: a job has ~30 texts.
      if (&piece >= &kPieces[kPieces.size() - kNotUtf8] && pick(0, 63) != 0) continue;
      s += piece;
    }
    return s;
  }
  TimeMs time() { return coin() ? 0 : pick(1, 4'000'000'000'000); }

  Job randomJob() {
    Job j;
    j.id = pick(1, 1'000'000);
    j.name = text();
    j.team = text();
    j.project = text();
    j.user = text();
    for (int64_t i = pick(0, 4); i > 0; --i) j.command.push_back(text());
    for (int64_t i = pick(0, 3); i > 0; --i) j.env[text()] = text();
    j.workdir = text();
    j.image = text();
    j.imageDigest = text();
    j.imageMinCuda = text();
    if (coin()) {
      j.arrayId = pick(1, 1000);
      j.arrayIndex = static_cast<int>(pick(0, 99));
      j.arrayLimit = static_cast<int>(pick(0, 8));
    }
    j.maxRuntimeMs = coin() ? 0 : pick(1, 400'000'000);
    j.resources.gpus = static_cast<int>(pick(0, 8));
    for (int64_t i = pick(0, 2); i > 0; --i) j.resources.gpuModels.push_back(text());
    j.resources.gpuMilli = static_cast<int>(pick(1, 1000));
    j.resources.gpuMemoryMib = pick(0, 80'000);
    j.resources.cpuMillis = static_cast<int>(pick(0, 64'000));
    j.resources.memoryMib = pick(0, 1'000'000);
    j.resources.wholeHost = coin();
    j.resources.minDriver = text();
    j.resources.minCuda = text();
    j.priority = static_cast<int>(pick(-1000, 1000));
    j.preemptible = coin();
    j.state = static_cast<JobState>(pick(0, static_cast<int64_t>(JobState::kPreempted)));
    j.reason = text();
    if (coin()) {
      model::Rank r;
      r.host = text();
      for (int64_t i = pick(0, 3); i > 0; --i) {
        r.gpuIndices.push_back(static_cast<int>(pick(0, 7)));
        r.gpuUuids.push_back(text());
      }
      j.ranks.push_back(r);
    }
    if (coin()) j.exitCode = static_cast<int>(pick(-1, 255));
    if (coin()) j.signal = static_cast<int>(pick(1, 31));
    j.cancelRequested = coin();
    j.heldBy = text();
    for (int64_t i = pick(0, 2); i > 0; --i) {
      j.dependencies.push_back({static_cast<model::DependencyKind>(pick(0, 2)), pick(1, 99)});
    }
    j.requeueRequestedBy = text();
    j.preemptions = static_cast<int>(pick(0, 5));
    j.evicting = coin();
    j.evictingSince = time();
    j.evictedFor = text();
    j.submittedAt = pick(0, 4'000'000'000'000);
    j.scheduledAt = time();
    j.startedAt = time();
    j.finishedAt = time();
    j.contour = text();
    if (pick(0, 9) == 0) j.resources.hosts = static_cast<int>(pick(2, 4));  // a gang
    return j;
  }
};

TEST_F(JobTextTest, EveryJobItTakesIsWrittenAsTheDocumentDumpsIt) {
  int written = 0, declined = 0;
  for (int i = 0; i < 5000; ++i) {
    const Job j = randomJob();
    api::JobTextOptions o;
    if (pick(0, 3) == 0) o.maxSpecBytes = static_cast<size_t>(pick(1, 40));
    if (pick(0, 3) == 0) o.arrayTasks = static_cast<size_t>(pick(1, 5));
    const std::string reason = text();
    if (pick(0, 3) == 0) o.reason = &reason;
    auto got = api::jobText(*cluster_, j, o);
    if (!got) {
      ++declined;
      // Only what it leaves to the document: a gang's ranks, a pull's progress, text that is not
      // UTF-8 (the document writes replacement characters for it).
      const std::string doc = documentText(*cluster_, j, o);
      const bool leftToTheDocument = (model::isGang(j) && !j.ranks.empty()) ||
                                     j.state == JobState::kPulling ||
                                     doc.find("\xef\xbf\xbd") != std::string::npos;
      EXPECT_TRUE(leftToTheDocument) << doc;
      continue;
    }
    ++written;
    ASSERT_EQ(*got, documentText(*cluster_, j, o)) << "job " << i;
  }
  EXPECT_GT(written, 2500);  // most jobs take the direct path
  EXPECT_GT(declined, 0);
}

// A queued job shows its place in the queue and its wait as the last pass left them.
TEST_F(JobTextTest, AQueuedJobsWaitIsWrittenAsTheDocumentHasIt) {
  joinHost("gpu-01", 2);
  submitSleep(alice_, 2);
  place();
  auto c = cluster_->submitJob(alice_, request({"true"}, 1));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  for (int pass = 0; pass < 2; ++pass) {
    auto now = cluster_->getJob(alice_, c->value.id);  // with its wait as the reason
    ASSERT_TRUE(now.ok());
    api::JobTextOptions o;
    o.reason = &now->reason;
    const auto& stored = cluster_->world().jobs.at(c->value.id);
    auto got = api::jobText(*cluster_, stored, o);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, api::ApiResponse::dumpBody(api::jobJson(*cluster_, *now)));
    place();  // the second time round it has a position
  }
  EXPECT_NE(api::jobText(*cluster_, job(c->value.id))->find("\"position\":1"), std::string::npos);
}

// Sessions, gangs placed on their hosts and jobs pulling their image keep the document's form
// (so do idle-flagged jobs: the flag comes from the idle service, which this fixture does not run).
TEST_F(JobTextTest, JobsWithPartsOnlyTheDocumentWritesAreDeclined) {
  Job session = randomJob();
  session.name = "s";
  session.session = model::SessionSpec{};
  EXPECT_FALSE(api::jobText(*cluster_, session).has_value());
  Job gang = randomJob();
  gang.resources.hosts = 2;
  gang.ranks = {model::Rank{}, model::Rank{}};
  EXPECT_FALSE(api::jobText(*cluster_, gang).has_value());
  Job pulling = randomJob();
  pulling.resources.hosts = 1;
  pulling.state = JobState::kPulling;
  EXPECT_FALSE(api::jobText(*cluster_, pulling).has_value());
}

}  // namespace
}  // namespace allot::control
