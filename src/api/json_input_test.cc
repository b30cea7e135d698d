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

TEST(JsonInput, RangesAndDefaults) {
  auto in = JsonInput::parse(R"({"gpus":-1})", {"gpus", "name"});
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(in->optionalInt("gpus", 0, 0, 8).ok());
  EXPECT_EQ(*in->optionalString("name", "x"), "x");
  EXPECT_FALSE(in->requiredString("name").ok());
}

}  // namespace
}  // namespace allot::api
