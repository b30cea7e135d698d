#pragma once
// Small helpers shared by the files that register routes.

#include "api/server.h"

namespace allot::api {

using Awaitable = boost::asio::awaitable<ApiResponse>;

// Binds `var` to the value of a Result, or replies with its error.
#define TRY_ASSIGN(var, expr)                                        \
  auto var##_r = (expr);                                             \
  if (!var##_r.ok()) co_return ApiResponse::error(var##_r.status()); \
  auto var = std::move(var##_r).value()

}  // namespace allot::api
