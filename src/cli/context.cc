#include "cli/context.h"

#include "cli/table.h"

namespace allot::cli {

Result<Settings> Context::settings() {
  if (!settings_) {
    auto s = resolveSettings(flags.server, flags.token, env_, flags.caFile);
    if (!s.ok()) return s.status();
    settings_ = *s;
  }
  return *settings_;
}

std::string Context::teamOr(const std::string& given) {
  if (!given.empty()) return given;
  auto s = settings();
  return s.ok() ? s->team : std::string();
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

Result<json> Context::request(const std::function<Result<json>(ApiClient&)>& call) {
  auto client = api();
  if (!client.ok()) return client.status();
  auto out = call(**client);
  if (!out.ok() && out.status().code() == Code::kUnauthenticated && settings_ &&
      !settings_->tokenWithheldFrom.empty()) {
    auto path = configPath(env_);
    return Status::Unauthenticated(out.status().message() + " (the token saved in " +
                                   (path.ok() ? *path : std::string("the config file")) +
                                   " is for the server saved with it, not " +
                                   settings_->tokenWithheldFrom +
                                   "; log in to this one with `allot login`, or set ALLOT_TOKEN)");
  }
  return out;
}

Result<json> Context::get(const std::string& path) {
  return request([&](ApiClient& a) { return a.get(path); });
}

Result<json> Context::post(const std::string& path, const json& body) {
  return request([&](ApiClient& a) { return a.post(path, body); });
}

Result<json> Context::put(const std::string& path, const json& body) {
  return request([&](ApiClient& a) { return a.put(path, body); });
}

Result<json> Context::patch(const std::string& path, const json& body) {
  return request([&](ApiClient& a) { return a.patch(path, body); });
}

Result<json> Context::del(const std::string& path) {
  return request([&](ApiClient& a) { return a.del(path); });
}

int Context::fail(const Status& status) {
  err_ << "allot: " << oneLine(status.message()) << "\n";
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

int Context::printReply(const Result<json>& reply, const std::function<void(const json&)>& print) {
  if (!reply.ok()) return fail(reply.status());
  if (jsonOutput()) return printJson(*reply);
  print(*reply);
  return 0;
}

int Context::printReplyLine(const Result<json>& reply,
                            const std::function<std::string(const json&)>& line) {
  return printReply(reply, [&](const json& doc) { out_ << line(doc) << "\n"; });
}

}  // namespace allot::cli
