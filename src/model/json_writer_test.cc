// JsonWriter must write what nlohmann's dump() writes for the same value, byte for byte: its
// strings are checked here on random texts of every length around its eight-byte scan, made of
// the bytes that need an escape, the ones around them, and multi-byte UTF-8.

#include "model/json_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace allot::model {
namespace {

TEST(JsonWriter, StringsAreWhatDumpWrites) {
  // clang-format off
  const std::vector<std::string> pieces = {
      "a", "Z", "0", " ", "!", "#", "[", "]", "~", "\x7f", "\"", "\\", "/", "\b", "\f", "\n", "\r",
      "\t", std::string(1, '\0'), "\x01", "\x1e", "\x1f", "\xc2\x80", "\xc3\xa9", "\xe6\x97\xa5",
      "\xf0\x9f\x98\x80", "abcdefgh", "train.py --epochs=90"};
  // clang-format on
  std::mt19937_64 rng(20261207);
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int round = 0; round < 20'000; ++round) {
    std::string text;
    const size_t parts = pick(40);
    for (size_t i = 0; i < parts; ++i) text += pieces[pick(pieces.size())];
    std::string out;
    JsonWriter w(out);
    w.string(text);
    ASSERT_TRUE(w.ok());
    ASSERT_EQ(out, nlohmann::json(text).dump()) << nlohmann::json(text).dump();
  }
}

TEST(JsonWriter, KeysAndValuesAreWhatDumpWrites) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  w.string("a", "x\"y");
  w.number("b", -12);
  w.boolean("c", true);
  w.stringOrNull("d", "");
  w.strings("e", {"p", "q\n"});
  w.numbers("f", std::vector<int>{1, 2});
  w.key("g");
  w.beginObject();
  w.endObject();
  w.endObject();
  const nlohmann::json doc = {{"a", "x\"y"},
                              {"b", -12},
                              {"c", true},
                              {"d", nullptr},
                              {"e", {"p", "q\n"}},
                              {"f", {1, 2}},
                              {"g", nlohmann::json::object()}};
  EXPECT_EQ(out, doc.dump());
}

TEST(JsonWriter, TextThatIsNotUtf8IsFlagged) {
  for (const std::string bad : {"\xff", "abcdefgh\xc3", "abcdefghijklmnop\x80"}) {
    std::string out;
    JsonWriter w(out);
    w.string(bad);
    EXPECT_FALSE(w.ok()) << bad;
  }
}

}  // namespace
}  // namespace allot::model
