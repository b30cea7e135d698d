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
    time_t secs = static_cast<time_t>(t / 1000 - (t % 1000 < 0 ? 1 : 0));
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

// Found by a review: past year 9999 chrono's calendar wrapped (year 65,555 printed as 0019, and
// 86,400,000 x 2^32 ms as the epoch), and a millisecond before 1970 printed as the epoch itself.
TEST(TimeFormat, Iso8601IsRightOutsideFourDigitYearsAndBefore1970) {
  EXPECT_EQ(formatIso8601(-1), "1969-12-31T23:59:59Z");
  EXPECT_EQ(formatIso8601(-999), "1969-12-31T23:59:59Z");
  EXPECT_EQ(formatIso8601(-1000), "1969-12-31T23:59:59Z");
  EXPECT_EQ(formatIso8601(-1001), "1969-12-31T23:59:58Z");
  EXPECT_EQ(formatIso8601(2'006'563'622'400'000), "65555-06-22T00:00:00Z");
  EXPECT_EQ(formatIso8601(86'400'000LL << 32), "11761191-01-21T00:00:00Z");
  EXPECT_EQ(formatIso8601(253'402'300'800'000), "10000-01-01T00:00:00Z");
  EXPECT_EQ(formatIso8601(INT64_MAX), "292278994-08-17T07:12:55Z");
  EXPECT_EQ(formatIso8601(INT64_MIN), "-292275055-05-16T16:47:04Z");
  auto before = parseTime("1969-12-31T23:59:59.500Z", 0);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(*before, -500);
  EXPECT_EQ(formatIso8601(*before), "1969-12-31T23:59:59Z");
}

// Found by a review: signs in fields, offsets past a day and days past their month were taken and
// silently moved to another time.
TEST(TimeFormat, RejectsFieldsOutOfTheirRanges) {
  for (const char* text :
       {"2026-01-01T-1:-5:-9Z", "2026-01-01T00:00+99:99", "2026-01-01T00:00+24:00",
        "2026-01-01T00:00+05-30", "2026-02-31", "2026-02-29", "2026-04-31", "2026--1-01",
        "+026-01-01", "2026-01-01T+1:00", "2026-01-01T01:+1"}) {
    EXPECT_FALSE(parseTime(text, 0).ok()) << text;
  }
  EXPECT_TRUE(parseTime("2028-02-29", 0).ok());
  EXPECT_TRUE(parseTime("2000-02-29", 0).ok());
  EXPECT_FALSE(parseTime("1900-02-29", 0).ok());
  EXPECT_TRUE(parseTime("2026-01-31T23:59:59+23:59", 0).ok());
  EXPECT_EQ(*parseTime("2026-11-30T08:00:00-03:30", 0), *parseTime("2026-11-30T11:30:00Z", 0));
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
  EXPECT_EQ(formatDuration(59'949), "59.9s");
  EXPECT_EQ(formatDuration(59'950), "1m00s") << "not 60.0s";
  EXPECT_EQ(formatDuration(59'999), "1m00s");
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
