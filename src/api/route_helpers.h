#pragma once
// Small helpers shared by the files that register routes.

#include <charconv>
#include <string>

#include "api/server.h"

namespace allot::api {

using Awaitable = boost::asio::awaitable<ApiResponse>;

// Binds `var` to the value of a Result, or replies with its error.
#define TRY_ASSIGN(var, expr)                                        \
  auto var##_r = (expr);                                             \
  if (!var##_r.ok()) co_return ApiResponse::error(var##_r.status()); \
  auto var = std::move(var##_r).value()

// A GPU index from a path parameter.
inline Result<int> parseGpuIndex(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Status::InvalidArgument("index: '" + s + "' is not a GPU index", "index");
  return v;
}

}  // namespace allot::api
