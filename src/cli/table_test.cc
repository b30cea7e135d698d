#include "cli/table.h"

#include <gtest/gtest.h>

namespace allot::cli {
namespace {

TEST(TableTest, AlignsColumnsWithTwoSpacesAndNoTrailingBlanks) {
  Table t({"ID", "NAME", "STATE"});
  t.addRow({"j-1", "train", "running"});
  t.addRow({"j-12345", "x", "queued"});
  EXPECT_EQ(t.render(),
            "ID       NAME   STATE\n"
            "j-1      train  running\n"
            "j-12345  x      queued\n");
}

TEST(TableTest, EmptyLastCellLeavesNoTrailingSpace) {
  Table t({"ID", "REASON"});
  t.addRow({"j-1", ""});
  t.addRow({"j-2", "waiting for 8 GPUs"});
  EXPECT_EQ(t.render(),
            "ID   REASON\n"
            "j-1\n"
            "j-2  waiting for 8 GPUs\n");
}

TEST(TableTest, ShortRowsArePaddedAndLongRowsCut) {
  Table t({"A", "B"});
  t.addRow({"1"});
  t.addRow({"1", "2", "3"});
  EXPECT_EQ(t.render(), "A  B\n1\n1  2\n");
}

TEST(TableTest, AlignsOnDisplayWidthNotBytes) {
  Table t({"NAME", "X"});
  t.addRow({"héllo", "1"});
  t.addRow({"hello", "2"});
  EXPECT_EQ(t.render(), "NAME   X\nhéllo  1\nhello  2\n");
  EXPECT_EQ(displayWidth("héllo"), 5u);
}

TEST(TableTest, NewlinesInCellsKeepOneRowOnOneLine) {
  Table t({"CMD"});
  t.addRow({"echo a\nb\tc"});
  EXPECT_EQ(t.render(), "CMD\necho a b c\n");
}

// Attack: a team-mate's lease reason, or a host's GPU model, carrying terminal escapes (erase the
// line, retitle the window, write the clipboard with OSC 52). Shown, they are only text.
TEST(TableTest, ControlCharactersAreShownNotObeyed) {
  Table t({"REASON"});
  t.addRow({"ok\x1b[2K\x1b]52;c;ZWNobyBwd25lZA==\x07 \x7f end"});
  t.addRow(
      {"c1 \xc2\x9b"
       "31m red, \xc2\xa0 kept"});
  const std::string out = t.render();
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
  EXPECT_NE(out.find("ok\\x1b[2K\\x1b]52;c;ZWNobyBwd25lZA==\\x07 \\x7f end"), std::string::npos)
      << out;
  EXPECT_NE(out.find("c1 \\u009b31m red, \xc2\xa0 kept"), std::string::npos)
      << "U+00A0 is no control: kept as it is\n"
      << out;
  Details d;
  d.add("model", "H100\x1b[8m");
  EXPECT_EQ(d.render(), "model: H100\\x1b[8m\n");
}

TEST(TableTest, HeaderOnlyWhenEmpty) {
  Table t({"NAME", "CREATED"});
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.render(), "NAME  CREATED\n");
}

TEST(DetailsTest, AlignsValuesAfterKeys) {
  Details d;
  d.add("id", "j-4");
  d.add("queue position", "2");
  d.add("reason", "");
  EXPECT_EQ(d.render(),
            "id:             j-4\n"
            "queue position: 2\n"
            "reason:\n");
}

}  // namespace
}  // namespace allot::cli
