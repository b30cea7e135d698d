#pragma once
// ImagePuller: the agent's image pulls, off its loop (docs/environments.md, "Pulls"). For each
// desired job in an image the loop asks want(); a pull runs on the puller's own thread, one at a
// time (as the store requires), and the loop reads how it goes at its next tick.
//
// An image is taken from the store without asking the registry when its reference is pinned by
// digest or names a tag other than "latest" (Kubernetes' IfNotPresent); a "latest" image is
// pulled again for the jobs that ask (Always), so that it means the newest.
//
// A registry that does not answer, or a disk that is full (Unavailable), is tried again after
// firstRetry, doubling to maxRetry, for as long as some job wants the image; the job's report
// says why it waits and when the next try is. Anything else (not found, refused, a digest
// mismatch) is final for the jobs waiting then; a later job asks afresh.
//
// Threading: want(), stateOf(), release() and generation() are for the agent's loop; the worker
// thread shares the entries under mu_.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "agent/image/image_store.h"

namespace allot::agent {

class ImagePuller {
 public:
  struct Options {
    std::chrono::milliseconds firstRetry{1000};
    std::chrono::milliseconds maxRetry{300'000};
  };
  ImagePuller(ImageStore& store, Options options);
  explicit ImagePuller(ImageStore& store) : ImagePuller(store, Options{}) {}
  // Stops the pull under way (its child is killed) and the worker.
  ~ImagePuller();
  ImagePuller(const ImagePuller&) = delete;
  ImagePuller& operator=(const ImagePuller&) = delete;

  struct State {
    enum class Kind { kPulling, kReady, kFailed };
    Kind kind = Kind::kPulling;
    std::optional<StoredImage> image;  // kReady
    Status failure;                    // kFailed
    std::string message;               // kPulling: why it takes long; "" while it just runs
    int64_t bytes = 0, total = 0;      // kPulling
  };
  // The image job `job` runs in: ready, failed, or being pulled (a pull started or queued by
  // this call). A job keeps its place until release(). `login`: its team's login to the
  // registry, or null; jobs share a pull only when they come with the same login, or none.
  State want(int64_t job, const ImageRef& ref, const PullLogin* login = nullptr);
  // How job `job`'s pull goes now; nullopt when it waits for none.
  std::optional<State> stateOf(int64_t job) const;
  // Job `job` waits no more (it started, failed, or is no longer wanted here). A pull no job
  // waits for is dropped, and stopped if it runs.
  void release(int64_t job);
  // Counts pulls that ended (or were put off): the loop looks again at its waiting jobs when
  // this moves.
  uint64_t generation() const;
  // allotd asked for `count` prunes so far (model::ImageCommands): when that is more than the
  // store has done, the worker prunes (ImageStore::prune) before its next pull.
  void requestPrunes(int64_t count);
  int64_t prunesDone() const;

 private:
  enum class Phase { kQueued, kRunning, kBackoff, kDone };
  struct Entry {
    ImageRef ref;
    std::optional<PullLogin> login;
    std::set<int64_t> jobs;
    Phase phase = Phase::kQueued;
    std::optional<Result<StoredImage>> result;  // kDone
    std::string message;                        // kBackoff: the last failure, and the next try
    std::chrono::steady_clock::time_point retryAt;
    std::chrono::milliseconds backoff{0};
    std::shared_ptr<PullProgress> progress = std::make_shared<PullProgress>();
  };
  State stateLocked(const Entry& e) const;
  void work();

  ImageStore& store_;
  Options o_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Entry> entries_;  // by ImageRef::str(), and the whole login if any
  std::map<int64_t, std::string> jobRef_;
  uint64_t generation_ = 0;
  int64_t prunesWanted_ = 0, prunesDone_ = 0;
  bool stop_ = false;
  std::thread worker_;  // last: started once everything it reads is there
};

}  // namespace allot::agent
