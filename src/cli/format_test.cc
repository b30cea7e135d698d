#include "cli/format.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/job_file.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

TEST(JobIdTest, AcceptsNumberAndPrefixedForms) {
  EXPECT_EQ(*parseJobId("42"), 42);
  EXPECT_EQ(*parseJobId("j-42"), 42);
  EXPECT_EQ(*parseJobId("J-7"), 7);
  EXPECT_EQ(formatJobId(42), "j-42");
}

TEST(JobIdTest, RejectsEverythingElseNamingTheText) {
  for (const char* bad :
       {"", "j-", "j42", "-3", "0", "4x", "job-4", "j--4", "99999999999999999999"}) {
    auto r = parseJobId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'" + std::string(bad) + "'"), std::string::npos);
  }
}

TEST(JobIdTest, JobIdTextReadsNumbersAndStrings) {
  EXPECT_EQ(jobIdText(json{{"id", 9}}), "j-9");
  EXPECT_EQ(jobIdText(json{{"id", "j-9"}}), "j-9");
  EXPECT_EQ(jobIdText(json{{"id", "9"}}), "j-9");
}

TEST(EnvTest, ParsesKeyValueEntries) {
  auto env = parseEnvEntries({"A=1", "B=x=y", "C=", "A=2"});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->at("A"), "2");  // the later entry wins
  EXPECT_EQ(env->at("B"), "x=y");
  EXPECT_EQ(env->at("C"), "");
  EXPECT_TRUE(parseEnvEntries({})->empty());
}

TEST(EnvTest, NamesTheFirstBadEntry) {
  auto r = parseEnvEntries({"A=1", "NOEQUALS", "=v"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--env 'NOEQUALS': expected KEY=VALUE");
  auto r2 = parseEnvEntries({"=v"});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("'=v'"), std::string::npos);
}

TEST(ResourceTest, CpusAndMemory) {
  EXPECT_EQ(*parseCpuMillis("2"), 2000);
  EXPECT_EQ(*parseCpuMillis("0.5"), 500);
  EXPECT_EQ(*parseCpuMillis("250m"), 250);
  for (const char* bad : {"", "m", "two", "-1", "1.5x"})
    EXPECT_FALSE(parseCpuMillis(bad).ok()) << bad;
  EXPECT_EQ(*parseMemoryMib("512"), 512);
  EXPECT_EQ(*parseMemoryMib("512Mi"), 512);
  EXPECT_EQ(*parseMemoryMib("16G"), 16384);
  EXPECT_EQ(*parseMemoryMib("1.5Gi"), 1536);
  EXPECT_EQ(*parseMemoryMib("1Ti"), 1048576);
  for (const char* bad : {"", "Gi", "16 GB", "16KB", "x"}) {
    auto r = parseMemoryMib(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--memory '" + std::string(bad) + "'"), std::string::npos);
  }
}

TEST(ResourceTest, GpuAmountsWholeAndFractional) {
  auto is = [](const char* text, int gpus, int milli) {
    auto r = parseGpuAmount(text);
    EXPECT_TRUE(r.ok()) << text << ": " << r.status().toString();
    if (r.ok()) {
      EXPECT_EQ(r->gpus, gpus) << text;
      EXPECT_EQ(r->milli, milli) << text;
    }
  };
  is("0", 0, 1000);
  is("8", 8, 1000);
  is("0.5", 1, 500);
  is(".25", 1, 250);
  is("0.125", 1, 125);
  is("2.0", 2, 1000);
  for (const char* bad : {"", "-1", "1.5", "0.0001", "half", "0.5x", "1e3", "."}) {
    auto r = parseGpuAmount(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--gpus '" + std::string(bad) + "'"), std::string::npos);
  }
  EXPECT_EQ(parseMemoryMib("10GiB", "--gpu-memory").value(), 10240);
  EXPECT_NE(parseMemoryMib("lots", "--gpu-memory").status().message().find("--gpu-memory 'lots'"),
            std::string::npos);
}

TEST(ResourceTest, GpuCountsListsAndLimits) {
  auto counts = parseGpuCounts({"A100=4", "H100 = 2,T4=0"});
  ASSERT_TRUE(counts.ok()) << counts.status().toString();
  EXPECT_EQ(*counts, (std::map<std::string, int>{{"A100", 4}, {"H100", 2}, {"T4", 0}}));
  for (const char* bad : {"A100", "=4", "A100=-1", "A100=x", "A100=1.5"}) {
    auto r = parseGpuCounts({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected MODEL=N"), std::string::npos);
  }
  EXPECT_EQ(splitList(" A100, H100 80GB ,,"), (std::vector<std::string>{"A100", "H100 80GB"}));
  EXPECT_EQ(*parseLimit("none", "--borrow-limit"), -1);
  EXPECT_EQ(*parseLimit("4", "--borrow-limit"), 4);
  EXPECT_EQ(parseLimit("-1", "--borrow-limit").status().message(),
            "--borrow-limit '-1': expected a number of GPUs or 'unlimited'");
}

TEST(RelativeTimeTest, PastFutureAndMissing) {
  TimeMs now = *parseTime("2026-11-30T12:00:00Z", 0);
  EXPECT_EQ(relativeTime("2026-11-30T11:57:00Z", now), "3m ago");
  EXPECT_EQ(relativeTime("2026-11-30T11:59:15Z", now), "45s ago");
  EXPECT_EQ(relativeTime("2026-11-30T09:00:00Z", now), "3h ago");
  EXPECT_EQ(relativeTime("2026-11-25T12:00:00Z", now), "5d ago");
  EXPECT_EQ(relativeTime("2026-11-30T12:00:00Z", now), "just now");
  EXPECT_EQ(relativeTime("2026-12-01T12:00:00Z", now), "in 1d");
  EXPECT_EQ(relativeTime("", now), "-");
  EXPECT_EQ(relativeTime("garbage", now), "-");
}

TEST(JobDurationTest, RunningFinishedAndNotStarted) {
  TimeMs now = *parseTime("2026-11-30T12:00:00Z", 0);
  EXPECT_EQ(
      jobDuration(json{{"started_at", "2026-11-30T11:56:48Z"}, {"finished_at", nullptr}}, now),
      "3m12s");
  EXPECT_EQ(jobDuration(json{{"started_at", "2026-11-30T10:00:00Z"},
                             {"finished_at", "2026-11-30T10:00:30Z"}},
                        now),
            "30.0s");
  EXPECT_EQ(jobDuration(json{{"started_at", nullptr}}, now), "-");
}

TEST(FormatTest, MemoryAndShellJoin) {
  EXPECT_EQ(formatMib(512), "512 MiB");
  EXPECT_EQ(formatMib(81920), "80 GiB");
  EXPECT_EQ(formatMib(1536), "1.5 GiB");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(3 << 10), "3.0 KiB");
  EXPECT_EQ(formatBytes(int64_t{104} << 20), "104.0 MiB");
  EXPECT_EQ(formatBytes(int64_t{1536} << 20), "1.5 GiB");
  EXPECT_EQ(shellJoin({"python", "train.py", "--lr=3e-4"}), "python train.py --lr=3e-4");
  EXPECT_EQ(shellJoin({"sh", "-c", "echo 'hi' there"}), "sh -c 'echo '\\''hi'\\'' there'");
  EXPECT_EQ(shellJoin({""}), "''");
}

TEST(FormatTest, TextOfJsonFields) {
  json j = {{"s", "x"}, {"e", ""}, {"n", 3}, {"b", true}, {"z", nullptr}};
  EXPECT_EQ(text(j, "s"), "x");
  EXPECT_EQ(text(j, "e"), "-");
  EXPECT_EQ(text(j, "n"), "3");
  EXPECT_EQ(text(j, "b"), "yes");
  EXPECT_EQ(text(j, "z"), "-");
  EXPECT_EQ(text(j, "missing", "none"), "none");
}

}  // namespace
TEST(JobFileTest, ReadsTheFlagsFieldsAndTheCommandLineWins) {
  std::istringstream in(R"(gpus: 2
gpu_model: [A100, H100]
max-runtime: 2h
env: {SEED: "1"}
array: 0-9%2
workdir: /shared/alice/code
preemptible: true
priority: 5
command: [python, train.py, --lr, "3e-4"]
)");
  RunOpts o;
  o.gpus = "4";  // given on the command line
  auto st = applyJobFile(in, "job.yaml", &o, [](const std::string& f) { return f == "gpus"; });
  ASSERT_TRUE(st.ok()) << st.toString();
  EXPECT_EQ(o.gpus, "4");
  EXPECT_EQ(o.gpuModel, "A100,H100");
  EXPECT_EQ(o.maxRuntime, "2h");
  EXPECT_EQ(o.env, std::vector<std::string>{"SEED=1"});
  EXPECT_EQ(o.array, "0-9%2");
  EXPECT_EQ(o.workdir, "/shared/alice/code");
  EXPECT_TRUE(o.preemptible);
  EXPECT_EQ(o.priority, 5);
  EXPECT_EQ(o.command, (std::vector<std::string>{"python", "train.py", "--lr", "3e-4"}));

  std::istringstream script("command: |\n  echo one\n  echo two\n");
  RunOpts s;
  ASSERT_TRUE(applyJobFile(script, "s.yaml", &s, [](const std::string&) { return false; }).ok());
  EXPECT_EQ(s.command, (std::vector<std::string>{"/bin/sh", "-c", "echo one\necho two\n"}));
}

TEST(JobFileTest, RefusesUnknownFieldsAndWrongKindsWithTheLine) {
  auto refused = [](const std::string& text) {
    std::istringstream in(text);
    RunOpts o;
    return applyJobFile(in, "job.yaml", &o, [](const std::string&) { return false; }).message();
  };
  EXPECT_NE(refused("gpus: 1\ngpuz: 2\n").find("job.yaml:2: unknown field 'gpuz'"),
            std::string::npos);
  EXPECT_NE(refused("preemptible: maybe\n").find("job.yaml:1: preemptible: expected true or false"),
            std::string::npos);
  EXPECT_NE(refused("priority: high\n").find("priority: expected a whole number"),
            std::string::npos);
  EXPECT_NE(refused("command: {a: 1}\n").find("command:"), std::string::npos);
  EXPECT_NE(refused("[1, 2]\n").find("a map of fields"), std::string::npos);
  EXPECT_NE(refused("gpus: [\n").find("not YAML"), std::string::npos);
  EXPECT_NE(refused("").find("empty"), std::string::npos);
}

}  // namespace allot::cli
