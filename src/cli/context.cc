#include "cli/context.h"

namespace allot::cli {

Result<Settings> Context::settings() {
  if (!settings_) {
    auto s = resolveSettings(flags.server, flags.token, env_, flags.caFile);
    if (!s.ok()) return s.status();
    settings_ = *s;
  }
  return *settings_;
}

Result<ApiClient*> Context::api() {
  if (!api_) {
    auto s = settings();
    if (!s.ok()) return s.status();
    HttpClientOptions options;
    options.caFile = s->caFile;
    auto http = HttpClient::create(s->server, s->token, options);
    if (!http.ok()) return http.status();
    api_ = std::make_unique<ApiClient>(std::move(http.value()));
  }
  return api_.get();
}

int Context::fail(const Status& status) {
  err_ << "allot: " << status.message() << "\n";
  err_.flush();
  return 1;
}

int Context::runAction() {
  if (flags.output == "csv" && !csvAllowed_)
    return usageError(Status::InvalidArgument(
        "--output: csv is for `allot report usage`; use table or json here"));
  return action_ ? action_() : 0;
}

int Context::usageError(const Status& status) {
  fail(status);
  return kUsageExit;
}

int Context::printJson(const json& doc) {
  out_ << doc.dump(2) << "\n";
  out_.flush();
  return 0;
}

}  // namespace allot::cli
