#include "common/version.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

TEST(Version, ComparesPartByPartAsNumbers) {
  EXPECT_GT(compareVersions("535.104.05", "535.54"), 0);  // text order would say older
  EXPECT_LT(compareVersions("535.54", "535.104"), 0);
  EXPECT_GT(compareVersions("550", "535.104.05"), 0);
  EXPECT_EQ(compareVersions("12", "12.0"), 0);
  EXPECT_EQ(compareVersions("12.04", "12.4"), 0);
  EXPECT_LT(compareVersions("9.9", "10.0"), 0);
  EXPECT_LT(compareVersions("12.2", "12.10"), 0);
}

TEST(Version, AtLeast) {
  EXPECT_TRUE(versionAtLeast("550.54.15", "550"));
  EXPECT_TRUE(versionAtLeast("12.4", "12.4"));
  EXPECT_FALSE(versionAtLeast("12.2", "12.4"));
  EXPECT_FALSE(versionAtLeast("535.104", "550"));
  EXPECT_TRUE(versionAtLeast("535.104", ""));  // no minimum
  // A host that reports nothing, or no number, meets no minimum.
  EXPECT_FALSE(versionAtLeast("", "1"));
  EXPECT_FALSE(versionAtLeast("simulated", "535"));
  EXPECT_FALSE(versionAtLeast("N/A", "1"));
}

TEST(Version, WhatCountsAsAVersion) {
  for (const char* ok : {"550", "535.104.05", "12.4", "1.2.3.4"}) EXPECT_TRUE(isDottedVersion(ok));
  for (const char* bad : {"", ".", "12.", ".12", "12..4", "v12", "12.4-rc1", "1.2.3.4.5", " 12",
                          "twelve", "123456789012345678901234567890123"})
    EXPECT_FALSE(isDottedVersion(bad)) << bad;
}

}  // namespace
}  // namespace allot
