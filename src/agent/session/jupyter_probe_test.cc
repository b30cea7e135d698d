// What the agent reads of a session's Jupyter for idle culling: the session's owner runs that
// server, so its replies are input like any other.
#include "agent/session/jupyter_probe.h"

#include <gtest/gtest.h>

#include "common/time_format.h"

namespace allot::agent {
namespace {

TEST(JupyterProbe, ReadsConnectionsBusyKernelsAndLastActivity) {
  auto a = jupyterActivityOf(
      R"({"connections": 2, "kernels": 3, "last_activity": "2026-12-06T04:00:00.000000Z"})",
      R"([{"execution_state": "busy"}, {"execution_state": "idle"}, {"execution_state": "busy"}])");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->connections, 2);
  EXPECT_EQ(a->busyKernels, 2);
  EXPECT_EQ(a->lastActivity, parseTime("2026-12-06T04:00:00Z", 0).value());
}

// Found in review after fuzz/wire_fuzz.cc's findings: value() threw on a field of another type,
// which ended the agent's connection loop (the host went lost), and cast 1e30 into an int.
TEST(JupyterProbe, FieldsOfAnotherTypeOrSizeReadAsAbsent) {
  for (const char* status :
       {R"({"connections": 1e30})", R"({"connections": "x"})", R"({"connections": -5})",
        R"({"connections": 18446744073709551615})", R"({"connections": null})",
        R"({"last_activity": 12})", R"({"last_activity": "+99999999999999999999999h"})"}) {
    std::optional<JupyterActivity> a;
    EXPECT_NO_THROW(a = jupyterActivityOf(status, "[]")) << status;
    ASSERT_TRUE(a.has_value()) << status;
    EXPECT_GE(a->connections, 0) << status;
    EXPECT_EQ(a->lastActivity, 0) << status;
  }
  for (const char* kernels : {R"([{"execution_state": 5}])", R"([1, "busy", null, []])",
                              R"([{"execution_state": ["busy"]}])"}) {
    std::optional<JupyterActivity> a;
    EXPECT_NO_THROW(a = jupyterActivityOf("{}", kernels)) << kernels;
    ASSERT_TRUE(a.has_value()) << kernels;
    EXPECT_EQ(a->busyKernels, 0) << kernels;
  }
  EXPECT_FALSE(jupyterActivityOf("[]", "[]").has_value());
  EXPECT_FALSE(jupyterActivityOf("{}", "{}").has_value());
  EXPECT_FALSE(jupyterActivityOf(std::string(100'000, '['), "[]").has_value());
}

}  // namespace
}  // namespace allot::agent
