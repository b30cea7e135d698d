#include "api/http_types.h"

namespace allot::api {

http::status httpStatusOf(Code code) {
  switch (code) {
    case Code::kOk:
      return http::status::ok;
    case Code::kInvalidArgument:
      return http::status::bad_request;
    case Code::kNotFound:
      return http::status::not_found;
    case Code::kAlreadyExists:
      return http::status::conflict;
    case Code::kFailedPrecondition:
      return http::status::conflict;
    case Code::kUnauthenticated:
      return http::status::unauthorized;
    case Code::kPermissionDenied:
      return http::status::forbidden;
    case Code::kTooLarge:
      return http::status::payload_too_large;
    case Code::kUnavailable:
      return http::status::service_unavailable;
    case Code::kInternal:
      return http::status::internal_server_error;
  }
  return http::status::internal_server_error;
}

ApiResponse ApiResponse::error(const Status& st) {
  nlohmann::json e = {{"code", codeName(st.code())}, {"message", st.message()}};
  if (!st.field().empty()) e["field"] = st.field();
  return json(nlohmann::json{{"error", e}}, httpStatusOf(st.code()));
}

}  // namespace allot::api
