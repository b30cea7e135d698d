#include "common/time_format.h"

#include <gtest/gtest.h>

#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace allot {
namespace {

TEST(TimeFormat, RoundTripsIso8601) {
  auto t = parseTime("2026-11-30T05:29:58Z", 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(formatIso8601(*t), "2026-11-30T05:29:58Z");
}

// formatIso8601 computes the calendar itself; gmtime_r and strftime, which it used before, are
// the reference, over random times from 1900 to 2500 and the edges of days and years.
TEST(TimeFormat, Iso8601AgreesWithStrftime) {
  auto reference = [](TimeMs t) {
    time_t secs = static_cast<time_t>(t / 1000);
    struct tm tm {};
    gmtime_r(&secs, &tm);
    char buf[48];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string(buf);
  };
  std::mt19937_64 rng(20261207);
  std::uniform_int_distribution<TimeMs> any(-2'208'988'800'000, 16'725'225'600'000);
  // A leap day (2000-02-29), the last second of year 9999, and around the epoch and midnight.
  std::vector<TimeMs> times = {951'782'400'000, 253'402'300'799'000};
  for (TimeMs t : {1, 999, 1000, 86'399'999, 86'400'000, 86'400'001}) {
    times.push_back(t);
    times.push_back(-t);
  }
  for (int i = 0; i < 200'000; ++i) times.push_back(any(rng));
  for (TimeMs t : times) ASSERT_EQ(formatIso8601(t), reference(t)) << t;
}

TEST(TimeFormat, AppliesOffsets) {
  auto utc = parseTime("2026-11-30T05:00:00Z", 0);
  auto msk = parseTime("2026-11-30T08:00:00+03:00", 0);
  ASSERT_TRUE(utc.ok() && msk.ok());
  EXPECT_EQ(*utc, *msk);
}

TEST(TimeFormat, RelativeForms) {
  EXPECT_EQ(*parseTime("+2h", 1000), 1000 + 7'200'000);
  EXPECT_EQ(*parseTime("-15m", 1'000'000), 100'000);
  EXPECT_EQ(*parseTime("now", 42), 42);
}

TEST(TimeFormat, RejectsGarbageWithMessage) {
  auto t = parseTime("tomorrow-ish", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tomorrow-ish"), std::string::npos);
  EXPECT_FALSE(parseTime("2026-13-01", 0).ok());
  EXPECT_FALSE(parseDurationMs("5y").ok());
}

TEST(TimeFormat, Durations) {
  EXPECT_EQ(*parseDurationMs("90s"), 90'000);
  EXPECT_EQ(*parseDurationMs("1.5h"), 5'400'000);
  EXPECT_EQ(*parseDurationMs("30"), 30'000);
  EXPECT_EQ(formatDuration(192'000), "3m12s");
}

// Found by fuzz/text_fuzz.cc: a duration past int64's range was cast from a double (undefined),
// and a time plus a huge one overflowed.
TEST(TimeFormat, DurationsLongerThanACenturyAreRefused) {
  EXPECT_EQ(*parseDurationMs("36500d"), kMaxDurationMs);
  EXPECT_FALSE(parseDurationMs("36501d").ok());
  EXPECT_FALSE(parseDurationMs(std::string(45, '8') + "m").ok());
  EXPECT_FALSE(parseDurationMs("1e99").ok());  // "e99" is no unit
  auto far = parseTime("+" + std::string(40, '9') + "h", 1'780'000'000'000);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("longer than 100 years"), std::string::npos);
  EXPECT_FALSE(parseTime("-" + std::string(40, '9') + "d", 1'780'000'000'000).ok());
}

TEST(TimeFormat, DurationSpecsReadBackExactly) {
  EXPECT_EQ(formatDurationSpec(7'200'000), "2h");
  EXPECT_EQ(formatDurationSpec(5'400'000), "90m");
  EXPECT_EQ(formatDurationSpec(172'800'000), "2d");
  EXPECT_EQ(formatDurationSpec(1'500), "1500ms");
  EXPECT_EQ(formatDurationSpec(0), "0s");
  for (TimeMs ms : {1LL, 999LL, 61'000LL, 3'660'000LL, 90'000'000LL}) {
    EXPECT_EQ(*parseDurationMs(formatDurationSpec(ms)), ms) << ms;
  }
}

}  // namespace
}  // namespace allot
