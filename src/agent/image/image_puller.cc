#include "agent/image/image_puller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace allot::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Kubernetes' default pull policy: a "latest" tag is asked of the registry each time, anything
// else is used as stored.
bool alwaysPull(const ImageRef& ref) { return ref.digest.empty() && ref.tag == "latest"; }

}  // namespace

ImagePuller::ImagePuller(ImageStore& store, Options options)
    : store_(store),
      o_(options),
      prunesWanted_(store.prunesDone()),
      prunesDone_(prunesWanted_),
      worker_([this] { work(); }) {}

ImagePuller::~ImagePuller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (auto& [key, e] : entries_) e.progress->cancel = true;
  }
  wake_.notify_all();
  worker_.join();
}

ImagePuller::State ImagePuller::stateLocked(const Entry& e) const {
  State s;
  if (e.phase == Phase::kDone) {
    if (e.result->ok()) {
      s.kind = State::Kind::kReady;
      s.image = e.result->value();
    } else {
      s.kind = State::Kind::kFailed;
      s.failure = e.result->status();
    }
    return s;
  }
  s.kind = State::Kind::kPulling;
  s.bytes = e.progress->bytes;
  s.total = e.progress->total;
  if (e.phase == Phase::kBackoff || (e.phase == Phase::kRunning && !e.message.empty())) {
    s.message = e.message;  // the last failure, until a try goes through
  } else if (e.phase == Phase::kQueued) {
    s.message = "waiting for another pull on this host to end";
  }
  return s;
}

ImagePuller::State ImagePuller::want(int64_t job, const ImageRef& ref, const PullLogin* login) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto it = jobRef_.find(job); it != jobRef_.end()) return stateLocked(entries_.at(it->second));
  if (!alwaysPull(ref)) {
    lock.unlock();
    // A small file and a stat per layer: cheap enough for the loop, and the common case (an
    // image this host already holds) starts the job at once.
    if (auto stored = store_.find(ref, login)) {
      State s;
      s.kind = State::Kind::kReady;
      s.image = std::move(*stored);
      return s;
    }
    lock.lock();
  }
  // Jobs share a pull only with the very same login (a username alone is no proof of one).
  const std::string key =
      login ? ref.str() + '\0' + login->registry + '\0' + login->username + '\0' + login->password
            : ref.str();
  auto [it, fresh] = entries_.try_emplace(key);
  Entry& e = it->second;
  if (fresh) {
    e.ref = ref;
    if (login) e.login = *login;
  }
  e.jobs.insert(job);
  jobRef_[job] = key;
  if (fresh) {
    spdlog::info("image {}: pulling for job {}", ref.str(), job);
    wake_.notify_all();
  }
  return stateLocked(e);
}

std::optional<ImagePuller::State> ImagePuller::stateOf(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobRef_.find(job);
  if (it == jobRef_.end()) return std::nullopt;
  return stateLocked(entries_.at(it->second));
}

void ImagePuller::release(int64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobRef_.find(job);
  if (it == jobRef_.end()) return;
  auto e = entries_.find(it->second);
  jobRef_.erase(it);
  e->second.jobs.erase(job);
  if (!e->second.jobs.empty()) return;
  if (e->second.phase == Phase::kRunning) {
    e->second.progress->cancel = true;  // the worker drops the entry when the pull stops
  } else {
    entries_.erase(e);
  }
}

uint64_t ImagePuller::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void ImagePuller::requestPrunes(int64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (count <= prunesWanted_) return;
  prunesWanted_ = count;
  wake_.notify_all();
}

int64_t ImagePuller::prunesDone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prunesDone_;
}

void ImagePuller::work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // A prune asked for comes first: pulls wait behind it in the store anyway.
    if (prunesWanted_ > prunesDone_) {
      const int64_t upTo = prunesWanted_;
      lock.unlock();
      auto removed = store_.prune();
      if (removed.ok()) {
        spdlog::info("image store: prune {} removed {} image(s), {} bytes", upTo,
                     removed->refs.size(), removed->freedBytes);
      } else {
        spdlog::warn("image store: prune {} failed: {}", upTo, removed.status().message());
      }
      store_.setPrunesDone(upTo);
      lock.lock();
      prunesDone_ = upTo;
      ++generation_;
      continue;
    }
    // The next pull: one never tried, or one whose back-off is over; else sleep until the
    // earliest back-off ends or something new is wanted.
    auto next = entries_.end();
    auto earliest = Clock::time_point::max();
    const auto now = Clock::now();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = it->second;
      if (e.phase == Phase::kQueued || (e.phase == Phase::kBackoff && e.retryAt <= now)) {
        next = it;
        break;
      }
      if (e.phase == Phase::kBackoff) earliest = std::min(earliest, e.retryAt);
    }
    if (next == entries_.end()) {
      if (earliest == Clock::time_point::max())
        wake_.wait(lock);
      else
        wake_.wait_until(lock, earliest);
      continue;
    }
    const std::string key = next->first;
    const ImageRef ref = next->second.ref;
    const std::optional<PullLogin> login = next->second.login;
    auto progress = std::make_shared<PullProgress>();
    next->second.progress = progress;
    next->second.phase = Phase::kRunning;
    // The images other jobs wait for (pulled, not yet started) stay if this pull makes room.
    std::set<std::string> waitedFor;
    for (const auto& [wanted, entry] : entries_) waitedFor.insert(entry.ref.str());
    lock.unlock();
    const auto started = Clock::now();
    Result<StoredImage> result =
        store_.pull(ref, login ? &*login : nullptr, progress.get(), waitedFor);
    lock.lock();
    ++generation_;
    auto it = entries_.find(key);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    if (e.jobs.empty()) {  // every job that wanted it went away meanwhile
      entries_.erase(it);
      continue;
    }
    if (!result.ok() && result.status().code() == Code::kUnavailable && !stop_) {
      e.backoff = e.backoff.count() == 0 ? o_.firstRetry : std::min(e.backoff * 2, o_.maxRetry);
      e.retryAt = Clock::now() + e.backoff;
      // Said once per failure, not counted down: the job's reason is stored when it changes.
      const auto seconds =
          std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(e.backoff).count());
      e.message = result.status().message() + "; trying again in " + std::to_string(seconds) + " s";
      e.phase = Phase::kBackoff;
      spdlog::warn("image {}: {}", ref.str(), e.message);
      continue;
    }
    if (result.ok()) {
      spdlog::info(
          "image {}: pulled as {} in {} ms", ref.str(), result->digest,
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    } else {
      spdlog::warn("image {}: {}", ref.str(), result.status().message());
    }
    e.result = std::move(result);
    e.phase = Phase::kDone;
  }
}

}  // namespace allot::agent
