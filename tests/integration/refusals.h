#pragma once
// Tables of requests allotd must refuse: each one's status, and an error body that says why
// (a message, and the offending field where the case names one). For the tests that check the
// bad input of one feature; api_errors_test.cc has its own, stricter table (codes, headers).

#include <string>
#include <vector>

#include "harness.h"

namespace allot::it {

struct RefusedRequest {
  std::string method, target, body, token;
  int status;
  std::string field;  // the "field" the error must name; "" when it names none in particular
};

// Sends each request to allotd on `port` and checks its refusal; a failure names the request.
inline void expectRefused(uint16_t port, const std::vector<RefusedRequest>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target + " " + c.body);
    HttpResult r = httpRequest(port, c.method, c.target, c.body, c.token);
    EXPECT_EQ(r.status, c.status) << r.body;
    json err = r.parsed().value("error", json::object());
    EXPECT_FALSE(textOf(err, "message").empty()) << r.body;
    if (!c.field.empty()) {
      EXPECT_EQ(textOf(err, "field"), c.field) << r.body;
    }
  }
}

}  // namespace allot::it
