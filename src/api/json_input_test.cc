#include "api/json_input.h"

#include <gtest/gtest.h>

namespace allot::api {
namespace {

TEST(JsonInput, RejectsMalformedAndNonObjects) {
  auto bad = JsonInput::parse("{not json", {"a"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("malformed"), std::string::npos);
  EXPECT_FALSE(JsonInput::parse("[1,2]", {"a"}).ok());
  EXPECT_TRUE(JsonInput::parse("", {"a"}).ok());
}

TEST(JsonInput, RejectsUnknownFieldsByName) {
  auto in = JsonInput::parse(R"({"gpus":1,"gpuz":2})", {"gpus"});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().field(), "gpuz");
}

TEST(JsonInput, TypeErrorsNameTheField) {
  auto in = JsonInput::parse(R"({"gpus":"two","command":["a",3],"env":{"A":1}})",
                             {"gpus", "command", "env"});
  ASSERT_TRUE(in.ok());
  auto g = in->optionalInt("gpus", 0, 0, 8);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().field(), "gpus");
  EXPECT_NE(g.status().message().find("integer"), std::string::npos);
  auto c = in->requiredStringArray("command");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("command[1]"), std::string::npos);
  EXPECT_FALSE(in->optionalStringMap("env").ok());
}

TEST(JsonInput, BoolsNumbersArraysAndIntMaps) {
  auto in = JsonInput::parse(
      R"({"b":true,"s":"yes","w":2,"f":2.5,"models":["A100"],"g":{"A100":4,"any":2},)"
      R"("neg":{"A100":-1},"frac":{"A100":1.5},"n":null})",
      {"b", "s", "w", "f", "models", "g", "neg", "frac", "n"});
  ASSERT_TRUE(in.ok());
  EXPECT_TRUE(*in->optionalBool("b", false));
  EXPECT_EQ(in->optionalBool("s", false).status().field(), "s");
  EXPECT_TRUE(*in->optionalBool("missing", true));
  EXPECT_EQ(*in->optionalNumber("w", 1), 2.0);
  EXPECT_EQ(*in->optionalNumber("f", 1), 2.5);
  EXPECT_EQ(in->optionalNumber("s", 1).status().field(), "s");
  EXPECT_EQ(*in->optionalStringArray("models"), std::vector<std::string>{"A100"});
  EXPECT_TRUE(in->optionalStringArray("n")->empty());
  auto g = in->optionalIntMap("g", 0, 10);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->at("any"), 2);
  EXPECT_EQ(in->optionalIntMap("neg", 0, 10).status().field(), "neg");
  EXPECT_EQ(in->optionalIntMap("frac", 0, 10).status().field(), "frac");
  EXPECT_TRUE(in->has("n"));
  EXPECT_FALSE(in->has("missing"));
}

TEST(JsonInput, RangesAndDefaults) {
  auto in = JsonInput::parse(R"({"gpus":-1})", {"gpus", "name"});
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(in->optionalInt("gpus", 0, 0, 8).ok());
  EXPECT_EQ(*in->optionalString("name", "x"), "x");
  EXPECT_FALSE(in->requiredString("name").ok());
}

// Issue 18, finding 7: 18446744073709551615 read back as -1, a valid priority.
TEST(JsonInput, HugeUnsignedNumbersAreOutOfRangeNotNegative) {
  auto in = JsonInput::parse(
      R"({"p":18446744073709551615,"a":[18446744073709551615],"m":{"x":18446744073709551615}})",
      {"p", "a", "m"});
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->optionalInt("p", 0, -1000, 1000).status().field(), "p");
  EXPECT_EQ(in->optionalIntArray("a", -1000, 1000).status().field(), "a");
  EXPECT_EQ(in->optionalIntMap("m", -1000, 1000).status().field(), "m");
}

// Nesting past kMaxJsonDepth is refused, naming the body, before anything reads it.
TEST(JsonInput, DeepNestingIsRefused) {
  auto in = JsonInput::parse("{\"a\":" + std::string(65, '[') + std::string(65, ']') + "}", {"a"});
  EXPECT_EQ(in.status().field(), "body");
  EXPECT_NE(in.status().message().find("nested deeper"), std::string::npos);
}

}  // namespace
}  // namespace allot::api
