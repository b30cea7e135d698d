#include "agent/image/image_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent/image/digest.h"
#include "common/bounded_json.h"
#include "common/sealed_box.h"
#include "common/secrets.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bounds on what a registry (any team's) makes the store read and wait for.
constexpr size_t kMaxIndexBytes = 16u << 20;
constexpr size_t kMaxManifestBytes = 4u << 20;  // a manifest or an image config
constexpr auto kPullTimeout = std::chrono::hours(1);
constexpr auto kUnpackTimeout = std::chrono::hours(1);
constexpr int64_t kLastUseGrainMs = 60'000;  // see find()

// The file's bytes; nullopt when it is missing or over `maxBytes`.
std::optional<std::string> slurp(const std::string& path, size_t maxBytes = kMaxManifestBytes) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec || size > maxBytes) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The name a reference has in the layout's index: only [a-z0-9-], whatever the reference holds.
std::string keyOf(const std::string& ref) { return "ref-" + sha256Hex(ref).substr(0, 32); }
std::string keyOf(const ImageRef& ref) { return keyOf(ref.str()); }

// Bytes `dir` takes on disk (allocated blocks, hard links once), its symlinks not followed.
int64_t diskUsage(const std::string& dir) {
  int64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !seen.insert({st.st_dev, st.st_ino}).second)
      continue;
    total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

std::vector<std::string> strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& v : j[key])
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

json toJson(const StoredImage& i) {
  return {{"ref", i.ref},
          {"digest", i.digest},
          {"layers", i.layers},
          {"bytes", i.bytes},
          {"last_used_ms", i.lastUsedMs},
          {"accounts", i.accounts},
          {"config",
           {{"entrypoint", i.config.entrypoint},
            {"cmd", i.config.cmd},
            {"env", i.config.env},
            {"working_dir", i.config.workingDir},
            {"user", i.config.user}}}};
}

std::optional<StoredImage> fromJson(const json& j) {
  try {
    StoredImage i;
    i.ref = j.at("ref").get<std::string>();
    i.digest = j.at("digest").get<std::string>();
    i.layers = j.at("layers").get<std::vector<std::string>>();
    i.bytes = j.at("bytes").get<int64_t>();
    i.lastUsedMs = j.value("last_used_ms", int64_t{0});  // absent in records before eviction
    i.accounts = j.value("accounts", std::vector<std::string>{});
    const json& c = j.at("config");
    i.config.entrypoint = c.at("entrypoint").get<std::vector<std::string>>();
    i.config.cmd = c.at("cmd").get<std::vector<std::string>>();
    i.config.env = c.at("env").get<std::vector<std::string>>();
    i.config.workingDir = c.at("working_dir").get<std::string>();
    i.config.user = c.at("user").get<std::string>();
    return i;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A containers-auth.json holding one login, for one pull: made new (never through a link or
// over a file someone else made), root's alone, and removed when the pull ends.
class AuthFile {
 public:
  static Result<std::unique_ptr<AuthFile>> write(const std::string& dir, const PullLogin& login) {
    const std::string path = dir + "/" + newToken("auth") + ".json";
    std::string b64 = toBase64(login.username + ":" + login.password);
    const std::string text = json{{"auths", {{login.registry, {{"auth", b64}}}}}}.dump();
    sodium_memzero(b64.data(), b64.size());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Unavailable("cannot write the registry login for the pull");
    auto file = std::unique_ptr<AuthFile>(new AuthFile(path));
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) return Status::Unavailable("cannot write the registry login for the pull");
    return file;
  }
  ~AuthFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  explicit AuthFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// What skopeo's last words mean for the user, and whether trying again later may help.
Status skopeoFailure(const ImageRef& ref, const std::string& tail, bool withLogin) {
  auto says = [&](const char* s) { return tail.find(s) != std::string::npos; };
  if (says("manifest unknown") || says("name unknown") || says("not found") ||
      says("NAME_UNKNOWN") || says("MANIFEST_UNKNOWN"))
    return Status::NotFound("image not found: " + ref.str(), "image");
  if (says("unauthorized") || says("authentication required") || says("denied"))
    return Status::PermissionDenied("the registry refused " + ref.str() +
                                    (withLogin ? " to the team's login: "
                                               : " without a login (the team has no login to " +
                                                     ref.registry +
                                                     ": allot team registry-login set): ") +
                                    tail);
  if (says("did not match") || says("digest mismatch") || says("Digest did not match"))
    return Status::InvalidArgument("refused " + ref.str() +
                                   ": what the registry sent does not match its digest: " + tail);
  if (says("no space left"))
    return Status::Unavailable("pulling " + ref.str() +
                               ": no space left on the image store's disk");
  return Status::Unavailable("the registry " + ref.registry + " did not serve " + ref.str() + ": " +
                             tail);
}

// Whether host[:port] names a loopback or link-local address, or resolves to one.
bool reachesThisHost(const std::string& registry) {
  std::string host = registry.substr(
      0, registry.rfind(':') == std::string::npos ? registry.size() : registry.rfind(':'));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;  // skopeo says
  auto localV4 = [](uint32_t ip) {
    return (ip >> 24) == 127 || (ip >> 16) == 0xa9fe || ip == 0;  // 127/8, 169.254/16, 0.0.0.0
  };
  bool local = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      local |= localV4(ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr));
    } else if (a->ai_family == AF_INET6) {
      const in6_addr& ip = reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr;
      uint32_t mapped = 0;
      std::memcpy(&mapped, &ip.s6_addr[12], sizeof mapped);
      local |= IN6_IS_ADDR_LOOPBACK(&ip) || IN6_IS_ADDR_LINKLOCAL(&ip) ||
               IN6_IS_ADDR_UNSPECIFIED(&ip) ||
               (IN6_IS_ADDR_V4MAPPED(&ip) && localV4(ntohl(mapped)));
    }
  }
  ::freeaddrinfo(found);
  return local;
}

}  // namespace

ImageStore::ImageStore(ImageStoreOptions options) : o_(std::move(options)) {
  std::error_code ec;
  for (const char* sub : {"oci", "layers", "images", "tmp"})
    fs::create_directories(o_.root + "/" + sub, ec);
  // Root's alone: layers keep their files' owners and modes, and none of a tenant's files may be
  // reachable, let alone writable, by another user of the host.
  ::chmod(o_.root.c_str(), 0700);
  // Signatures are not what this store checks (digests are): skopeo is given a policy of its
  // own, not whatever /etc/containers/policy.json says on this host.
  std::ofstream(o_.root + "/policy.json") << R"({"default":[{"type":"insecureAcceptAnything"}]})"
                                          << "\n";
  // What a pull without a login of its job's is given, so that skopeo looks for none elsewhere.
  std::ofstream(o_.root + "/no-logins.json") << R"({"auths":{}})"
                                             << "\n";
  // The key of the logins' fingerprints. Without it (a store root that cannot hold it), one for
  // this process: images fetched with a login are then asked of the registry again after a
  // restart, which is safe.
  auto key = loadOrCreateSealKey(o_.root + "/login.key");
  if (!key.ok()) spdlog::warn("image store: {}", key.status().message());
  loginKey_ = key.ok() ? *key : newSealKey();
}

Status ImageStore::runChild(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                            std::string* errorTail, int* exitCode,
                            const std::function<void()>& whileWaiting, size_t keepBytes,
                            const std::atomic<bool>* cancel) {
  const std::string log = o_.root + "/tmp/child-" + std::to_string(::getpid()) + ".log";
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Nothing of the agent's environment (its join token) reaches the child.
  std::string path = "PATH=/usr/sbin:/usr/bin:/sbin:/bin", lang = "LANG=C.UTF-8",
              tmp = "TMPDIR=" + o_.root + "/tmp", home = "HOME=" + o_.root + "/tmp";
  std::vector<char*> env = {path.data(), lang.data(), tmp.data(), home.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // A group of its own, so that a child past its time goes with whatever it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, args[0], &fa, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return Status::Unavailable("cannot start " + argv[0] + ": " + std::strerror(err));
  // A registry that trickles bytes, or a layer that takes for ever, must not hold the store.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool timedOut = false;
  bool cancelled = false;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (!timedOut && std::chrono::steady_clock::now() > deadline) {
      timedOut = true;
      ::kill(-pid, SIGKILL);
    }
    if (!cancelled && cancel && cancel->load()) {
      cancelled = true;
      ::kill(-pid, SIGKILL);
    }
    if (whileWaiting) whileWaiting();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string out = slurp(log).value_or("");
  ::unlink(log.c_str());
  if (out.size() > keepBytes) out = out.substr(out.size() - keepBytes);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (errorTail) *errorTail = out;
  if (exitCode) *exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (cancelled) return Status::Unavailable(argv[0] + " was stopped: the pull was cancelled");
  if (timedOut)
    return Status::Unavailable(argv[0] + " took over " + std::to_string(timeout.count()) +
                               " s and was stopped");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Internal(argv[0] + " failed: " + out);
}

Status ImageStore::unpackLayer(const std::string& hex) {
  const std::string dest = o_.root + "/layers/" + hex;
  std::error_code ec;
  if (fs::is_directory(dest, ec)) return Status::Ok();
  const std::string tmp = dest + ".tmp";
  fs::remove_all(tmp, ec);  // left by an agent that stopped mid-unpack
  std::string tail;
  int code = -1;
  Status st = runChild({o_.unpacker, hex, o_.root + "/oci/blobs/sha256/" + hex, tmp},
                       kUnpackTimeout, &tail, &code);
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    // The unpacker's exit status says which kind of failure (layer_unpack_main.cc); its words
    // are the layer's entries', never matched on.
    if (st.code() == Code::kUnavailable || code == 4) return Status::Unavailable(st.message());
    return Status::InvalidArgument("layer sha256:" + hex + " refused: " + tail);
  }
  // Counted once, here: the budget is checked after every pull, and a walk of every layer then
  // would cost more than the pull of a small image.
  std::ofstream(dest + ".bytes") << diskUsage(tmp) << "\n";
  if (::rename(tmp.c_str(), dest.c_str()) != 0)
    return Status::Unavailable("cannot publish layer " + dest + ": " + std::strerror(errno));
  return Status::Ok();
}

Result<StoredImage> ImageStore::resolve(const ImageRef& ref, const std::string& key) {
  auto index = slurp(o_.root + "/oci/index.json", kMaxIndexBytes);
  if (!index) return Status::Internal("the image store has no index.json after a pull");
  std::string manifestDigest;
  try {
    const json parsed = parseBoundedJson(*index);
    if (parsed.is_discarded())
      return Status::Internal("the image store's index.json is unreadable");
    for (const auto& m : parsed.at("manifests")) {
      const json ann = m.value("annotations", json::object());
      if (ann.value("org.opencontainers.image.ref.name", "") == key)
        manifestDigest = m.at("digest").get<std::string>();
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("the image store's index.json is unreadable: ") + e.what());
  }
  if (!isSha256Digest(manifestDigest))
    return Status::Internal("no manifest of " + ref.str() + " in the image store");
  auto blob = [&](const std::string& digest) {
    return slurp(o_.root + "/oci/blobs/sha256/" + digest.substr(7));
  };
  auto manifestBytes = blob(manifestDigest);
  if (!manifestBytes || "sha256:" + sha256Hex(*manifestBytes) != manifestDigest)
    return Status::InvalidArgument("the manifest of " + ref.str() + " does not match its digest");
  if (!ref.digest.empty() && ref.digest != manifestDigest)
    return Status::InvalidArgument("refused " + ref.str() + ": its manifest is " + manifestDigest);
  StoredImage image;
  image.ref = ref.str();
  image.digest = manifestDigest;
  try {
    const json manifest = parseBoundedJson(*manifestBytes);
    if (manifest.is_discarded())
      return Status::InvalidArgument("the manifest of " + ref.str() + " is not JSON");
    for (const auto& l : manifest.at("layers")) {
      std::string d = l.at("digest").get<std::string>();
      if (!isSha256Digest(d))
        return Status::InvalidArgument("a layer of " + ref.str() +
                                       " has a digest that is not "
                                       "sha256 and 64 hex digits");
      const int64_t size =
          l.contains("size") && l["size"].is_number_integer() ? l["size"].get<int64_t>() : 0;
      if (size < 0 || size > (int64_t{1} << 50))
        return Status::InvalidArgument("a layer of " + ref.str() + " has size " +
                                       std::to_string(size));
      image.bytes += size;
      // A layer listed twice is one layer: the topmost use of it is what the image sees.
      std::erase(image.layers, d.substr(7));
      image.layers.push_back(d.substr(7));
    }
    std::string configDigest = manifest.at("config").at("digest").get<std::string>();
    if (!isSha256Digest(configDigest))
      return Status::InvalidArgument("bad config digest in " + ref.str());
    auto configBytes = blob(configDigest);
    if (!configBytes || "sha256:" + sha256Hex(*configBytes) != configDigest)
      return Status::InvalidArgument("the config of " + ref.str() + " does not match its digest");
    const json whole = parseBoundedJson(*configBytes);
    if (whole.is_discarded())
      return Status::InvalidArgument("the config of " + ref.str() + " is not JSON");
    static const json kNone = json::object();
    auto found = whole.find("config");
    const json& config = found != whole.end() && found->is_object() ? *found : kNone;
    auto text = [&config](const char* key) {
      auto it = config.find(key);
      return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    image.config.entrypoint = strings(config, "Entrypoint");
    image.config.cmd = strings(config, "Cmd");
    image.config.env = strings(config, "Env");
    image.config.workingDir = text("WorkingDir");
    image.config.user = text("User");
  } catch (const std::exception& e) {
    return Status::InvalidArgument("the manifest or config of " + ref.str() +
                                   " is not valid: " + e.what());
  }
  return image;
}

int64_t ImageStore::blobBytes() const {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(o_.root + "/oci/blobs/sha256", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code sec;
    const auto size = it->file_size(sec);
    if (!sec) total += static_cast<int64_t>(size);
  }
  return total;
}

int64_t ImageStore::bytesToFetch(const ImageRef& ref,
                                 const std::vector<std::string>& registryFlags) {
  std::vector<std::string> argv = {o_.skopeo, "--policy", o_.root + "/policy.json", "inspect",
                                   "--raw"};
  argv.insert(argv.end(), registryFlags.begin(), registryFlags.end());
  argv.push_back(ref.transport());
  std::string out;
  if (!runChild(argv, std::chrono::seconds(60), &out, nullptr, {}, kMaxManifestBytes).ok())
    return 0;
  const json manifest = parseBoundedJson(out);
  if (manifest.is_discarded() || !manifest.is_object()) return 0;
  int64_t total = 0;
  auto add = [&](const json& blob) {
    if (!blob.is_object() || !blob.contains("size") || !blob["size"].is_number_integer()) return;
    const std::string digest = blob.value("digest", "");
    std::error_code ec;
    if (isSha256Digest(digest) && fs::exists(o_.root + "/oci/blobs/sha256/" + digest.substr(7), ec))
      return;  // here already: skopeo does not fetch it again
    total += std::max<int64_t>(0, blob["size"].get<int64_t>());
  };
  if (manifest.contains("config")) add(manifest["config"]);
  if (manifest.contains("layers") && manifest["layers"].is_array())
    for (const auto& l : manifest["layers"]) add(l);
  return total;
}

std::optional<StoredImage> ImageStore::readRecordLocked(const ImageRef& ref) const {
  auto text = slurp(o_.root + "/images/" + keyOf(ref) + ".json");
  if (!text) return std::nullopt;
  std::optional<StoredImage> image;
  try {
    image = fromJson(parseBoundedJson(*text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!image || image->ref != ref.str()) return std::nullopt;
  return image;
}

std::string PullLogin::fingerprint(const std::string& key) const {
  const std::string whole = registry + '\0' + username + '\0' + password;
  unsigned char out[32];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(whole.data()),
                     whole.size(), reinterpret_cast<const unsigned char*>(key.data()), key.size());
  char hex[sizeof out * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, out, sizeof out);
  return username + ":" + hex;
}

std::optional<StoredImage> ImageStore::find(const ImageRef& ref, const PullLogin* login) {
  const std::string account = login ? login->fingerprint(loginKey_) : "";
  std::lock_guard<std::mutex> lock(records_);
  std::optional<StoredImage> image = readRecordLocked(ref);
  if (!image) return std::nullopt;
  if (!image->accounts.empty() &&
      std::find(image->accounts.begin(), image->accounts.end(), account) == image->accounts.end())
    return std::nullopt;
  std::error_code ec;
  for (const auto& hex : image->layers) {
    if (!fs::is_directory(o_.root + "/layers/" + hex, ec)) return std::nullopt;
  }
  pinned_.insert(image->ref);
  // The eviction order needs no finer grain than a minute: a job start rewrites the record only
  // when its last use is older, so back-to-back starts in one image write nothing.
  const int64_t now = nowMs();
  if (now - image->lastUsedMs >= kLastUseGrainMs) {
    image->lastUsedMs = now;
    if (Status st = writeRecordLocked(*image); !st.ok())
      spdlog::warn("image {}: its last use was not recorded: {}", image->ref, st.message());
  }
  return image;
}

Status ImageStore::writeRecordLocked(const StoredImage& image) {
  const std::string record = o_.root + "/images/" + keyOf(image.ref) + ".json";
  std::ofstream(record + ".tmp") << toJson(image).dump() << "\n";
  if (::rename((record + ".tmp").c_str(), record.c_str()) != 0)
    return Status::Unavailable("cannot record " + image.ref + ": " + std::strerror(errno));
  return Status::Ok();
}

int64_t ImageStore::nowMs() const {
  if (o_.nowMs) return o_.nowMs();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<StoredImage> ImageStore::pull(const ImageRef& ref, const PullLogin* login,
                                     PullProgress* progress, const std::set<std::string>& keep) {
  const bool listed = std::find(o_.insecureRegistries.begin(), o_.insecureRegistries.end(),
                                ref.registry) != o_.insecureRegistries.end();
  if (!listed && reachesThisHost(ref.registry))
    return Status::PermissionDenied("image " + ref.str() + ": the registry " + ref.registry +
                                    " is this host or its link (loopback or link-local), which "
                                    "only an admin-listed registry may be");
  std::lock_guard<std::mutex> lock(pulling_);
  const std::string key = keyOf(ref);
  // The same registry options for `inspect` and for `copy`, whose are named for the source.
  std::vector<std::string> inspectFlags, copyFlags;
  if (listed) {
    inspectFlags.push_back("--tls-verify=false");
    copyFlags.push_back("--src-tls-verify=false");
  }
  // Without a login of the job's, skopeo must not find one elsewhere either (its default auth
  // files are under the agent's HOME and XDG_RUNTIME_DIR, which runChild does not pass on; an
  // empty auth file makes that certain).
  std::unique_ptr<AuthFile> auth;
  if (login && login->registry == ref.registry) {
    auto made = AuthFile::write(o_.root + "/tmp", *login);
    if (!made.ok()) return made.status();
    auth = std::move(*made);
  }
  const std::string authPath = auth ? auth->path() : o_.root + "/no-logins.json";
  inspectFlags.insert(inspectFlags.end(), {"--authfile", authPath});
  copyFlags.insert(copyFlags.end(), {"--src-authfile", authPath});
  std::function<void()> measure;
  if (progress) {
    progress->total = bytesToFetch(ref, inspectFlags);
    const int64_t before = blobBytes();
    auto last = std::chrono::steady_clock::now();
    measure = [this, progress, before, last]() mutable {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::seconds(1)) return;
      last = now;
      progress->bytes = std::max<int64_t>(0, blobBytes() - before);
    };
  }
  std::vector<std::string> argv = {o_.skopeo, "--policy", o_.root + "/policy.json", "copy",
                                   "--quiet"};
  argv.insert(argv.end(), copyFlags.begin(), copyFlags.end());
  argv.push_back(ref.transport());
  argv.push_back("oci:" + o_.root + "/oci:" + key);
  std::string tail;
  using Clock = std::chrono::steady_clock;
  const auto msSince = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  const auto copyStarted = Clock::now();
  if (Status st = runChild(argv, kPullTimeout, &tail, nullptr, measure, 2048,
                           progress ? &progress->cancel : nullptr);
      !st.ok())
    return st.code() == Code::kUnavailable ? st : skopeoFailure(ref, tail, auth != nullptr);
  if (progress) progress->bytes = progress->total.load();
  auto image = resolve(ref, key);
  if (!image.ok()) return image.status();
  spdlog::info("image {}: fetched in {} ms", ref.str(), msSince(copyStarted));
  for (const std::string& hex : image->layers) {
    if (progress && progress->cancel)
      return Status::Unavailable("the pull of " + ref.str() + " was cancelled");
    const auto unpackStarted = Clock::now();
    if (Status st = unpackLayer(hex); !st.ok()) return st;
    spdlog::info("image {}: layer {} ready in {} ms", ref.str(), hex.substr(0, 12),
                 msSince(unpackStarted));
  }
  image->lastUsedMs = nowMs();
  {
    std::lock_guard<std::mutex> records(records_);
    // Who the registry served it to: anyone (no login), or the accounts whose pulls of this
    // very manifest went through (see StoredImage::accounts).
    if (auth) {
      auto before = readRecordLocked(ref);
      if (before && before->digest == image->digest) image->accounts = before->accounts;
      if (!before || before->digest != image->digest || !before->accounts.empty())
        image->accounts.push_back(login->fingerprint(loginKey_));
      std::sort(image->accounts.begin(), image->accounts.end());
      image->accounts.erase(std::unique(image->accounts.begin(), image->accounts.end()),
                            image->accounts.end());
    }
    if (Status st = writeRecordLocked(*image); !st.ok()) return st;
    pinned_.insert(image->ref);
  }
  if (o_.budgetBytes > 0) {
    std::set<std::string> spare = keep;
    spare.insert(image->ref);
    auto evicted = removeUnused(o_.budgetBytes, spare);
    if (!evicted.ok())
      spdlog::warn("image store: eviction after pulling {} failed: {}", ref.str(),
                   evicted.status().message());
  }
  return image;
}

void ImageStore::setInUse(std::set<std::string> refs, std::set<std::string> layers) {
  std::lock_guard<std::mutex> lock(records_);
  inUseRefs_ = std::move(refs);
  inUseLayers_ = std::move(layers);
  pinnedBefore_ = std::move(pinned_);
  pinned_.clear();
}

Result<Removal> ImageStore::evict(const std::set<std::string>& keep) {
  if (o_.budgetBytes <= 0) return Removal{};
  std::lock_guard<std::mutex> lock(pulling_);
  return removeUnused(o_.budgetBytes, keep);
}

Result<Removal> ImageStore::prune() {
  std::lock_guard<std::mutex> lock(pulling_);
  return removeUnused(std::nullopt, {});
}

int64_t ImageStore::diskBytes() const {
  int64_t total = blobBytes();
  std::error_code ec;
  std::vector<fs::path> entries;
  for (auto it = fs::directory_iterator(o_.root + "/layers", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    entries.push_back(it->path());
  for (const fs::path& entry : entries) {
    const std::string path = entry.string();
    if (entry.has_extension() || !fs::is_directory(entry, ec)) continue;
    auto text = slurp(path + ".bytes", 64);
    if (text) {
      total += std::atoll(text->c_str());
    } else {
      // Unpacked by an agent from before the budget: counted now, once.
      const int64_t bytes = diskUsage(path);
      std::ofstream(path + ".bytes") << bytes << "\n";
      total += bytes;
    }
  }
  return total;
}

int64_t ImageStore::prunesDone() const {
  auto text = slurp(o_.root + "/prunes-done", 64);
  return text ? std::atoll(text->c_str()) : 0;
}

void ImageStore::setPrunesDone(int64_t n) {
  const std::string path = o_.root + "/prunes-done";
  std::ofstream(path + ".tmp") << n << "\n";
  if (::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    spdlog::warn("image store: cannot record prune {}: {}", n, std::strerror(errno));
}

Result<Removal> ImageStore::removeUnused(std::optional<int64_t> budget,
                                         const std::set<std::string>& keep) {
  Removal out;
  // First what earlier removals had to leave (layers a container mounted then, a failed pull's
  // blobs): the budget is measured against what is needed.
  const int64_t before = diskBytes();
  if (Status st = collectGarbage(); !st.ok()) return st;
  int64_t bytesNow = diskBytes();
  std::vector<StoredImage> images = list();
  std::stable_sort(images.begin(), images.end(), [](const StoredImage& a, const StoredImage& b) {
    return a.lastUsedMs < b.lastUsedMs;
  });
  for (const StoredImage& image : images) {
    if (budget && bytesNow <= *budget) break;
    {
      std::lock_guard<std::mutex> lock(records_);
      if (keep.count(image.ref) || inUseRefs_.count(image.ref) || pinned_.count(image.ref) ||
          pinnedBefore_.count(image.ref))
        continue;
      std::error_code ec;
      if (!fs::remove(o_.root + "/images/" + keyOf(image.ref) + ".json", ec) || ec) continue;
    }
    spdlog::info("image store: removed {} ({}), last used at {} ms", image.ref, image.digest,
                 image.lastUsedMs);
    out.refs.push_back(image.ref);
    // Against a budget, what each removal freed decides whether the next one is needed.
    if (budget) {
      if (Status st = collectGarbage(); !st.ok()) return st;
      bytesNow = diskBytes();
    }
  }
  if (!budget && !out.refs.empty()) {
    if (Status st = collectGarbage(); !st.ok()) return st;
    bytesNow = diskBytes();
  }
  out.freedBytes = std::max<int64_t>(0, before - bytesNow);
  return out;
}

std::vector<std::string> ImageStore::lowerDirs(const StoredImage& image) const {
  std::vector<std::string> out;
  for (auto it = image.layers.rbegin(); it != image.layers.rend(); ++it)
    out.push_back(o_.root + "/layers/" + *it);
  return out;
}

std::vector<StoredImage> ImageStore::list() const {
  std::vector<StoredImage> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(o_.root + "/images", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto& e = *it;
    if (e.path().extension() != ".json") continue;
    auto text = slurp(e.path().string());
    if (!text) continue;
    try {
      if (auto image = fromJson(parseBoundedJson(*text))) out.push_back(std::move(*image));
    } catch (const std::exception&) {
    }
  }
  std::sort(out.begin(), out.end(),
            [](const StoredImage& a, const StoredImage& b) { return a.ref < b.ref; });
  return out;
}

Status ImageStore::collectGarbage() {
  // What is still needed: the records left, and the layers running containers mount.
  std::set<std::string> keys, layers, blobs;
  {
    std::lock_guard<std::mutex> lock(records_);
    layers = inUseLayers_;
  }
  for (const auto& image : list()) {
    keys.insert(keyOf(image.ref));
    layers.insert(image.layers.begin(), image.layers.end());
  }
  // The layout's index keeps the manifests of recorded images only (a pull that failed after
  // skopeo's copy left one without a record); the blobs they reach stay. Anything unreadable
  // keeps every blob.
  bool blobsKnown = false;
  const std::string indexPath = o_.root + "/oci/index.json";
  if (auto index = slurp(indexPath, kMaxIndexBytes)) {
    try {
      json parsed = parseBoundedJson(*index);
      if (!parsed.is_discarded() && parsed.contains("manifests") &&
          parsed["manifests"].is_array()) {
        blobsKnown = true;
        json kept = json::array();
        for (const auto& m : parsed["manifests"]) {
          const json ann = m.value("annotations", json::object());
          if (!keys.count(ann.value("org.opencontainers.image.ref.name", ""))) continue;
          kept.push_back(m);
          const std::string digest = m.value("digest", "");
          auto manifestBytes = isSha256Digest(digest)
                                   ? slurp(o_.root + "/oci/blobs/sha256/" + digest.substr(7))
                                   : std::nullopt;
          const json manifest =
              manifestBytes ? parseBoundedJson(*manifestBytes) : json(json::value_t::discarded);
          if (manifest.is_discarded() || !manifest.contains("layers")) {
            blobsKnown = false;
            continue;
          }
          blobs.insert(digest.substr(7));
          blobs.insert(manifest.at("config").at("digest").get<std::string>().substr(7));
          for (const auto& l : manifest.at("layers"))
            blobs.insert(l.at("digest").get<std::string>().substr(7));
        }
        if (kept.size() != parsed["manifests"].size()) {
          parsed["manifests"] = kept;
          std::ofstream(indexPath + ".tmp") << parsed.dump() << "\n";
          if (::rename((indexPath + ".tmp").c_str(), indexPath.c_str()) != 0)
            return Status::Unavailable("cannot rewrite the image store's index: " +
                                       std::string(std::strerror(errno)));
        }
      }
    } catch (const std::exception& e) {
      spdlog::warn("image store: index.json unreadable, blobs kept: {}", e.what());
      blobsKnown = false;
    }
  }
  std::error_code ec;
  if (blobsKnown) {
    std::vector<fs::path> gone;
    for (auto it = fs::directory_iterator(o_.root + "/oci/blobs/sha256", ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
      if (!blobs.count(it->path().filename().string())) gone.push_back(it->path());
    for (const auto& path : gone) fs::remove(path, ec);
  }
  // Unpacked layers: moved aside first (one rename), so that no half-removed layer is ever
  // under its name.
  std::vector<std::string> stale;
  for (auto it = fs::directory_iterator(o_.root + "/layers", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    const std::string hex = name.substr(0, name.find('.'));
    if (!layers.count(hex)) stale.push_back(name);
  }
  for (const auto& name : stale) {
    const std::string path = o_.root + "/layers/" + name;
    const std::string trash = o_.root + "/tmp/removed-" + name;
    std::error_code rec;
    if (::rename(path.c_str(), trash.c_str()) == 0) fs::remove_all(trash, rec);
  }
  return Status::Ok();
}

}  // namespace allot::agent
