#pragma once
// The host's image cache (docs/environments.md). Under its root:
//
//   oci/            an OCI image layout that skopeo copies into: blobs by digest, so a layer two
//                   images share is fetched and stored once
//   layers/<hex>/   each layer unpacked once (allot-layer-unpack), shared by every image and job
//   images/<key>.json  what a pulled reference resolved to: its manifest digest, layers and
//                   config, for `allot image list` and for jobs; when a job last started in it
//   layers/<hex>.bytes  the unpacked layer's size on disk, counted once when it was unpacked
//   tmp/            skopeo's and the unpacker's scratch, on the same file system
//
// A disk budget (ImageStoreOptions::budgetBytes) bounds the blobs and unpacked layers together:
// after each pull the least recently used images that no job uses are removed until the store
// fits (docs/environments.md, "The cache"). An image is in use while a job runs in it
// (setInUse), and from the moment find() or pull() hands it out until the job has had a tick
// to start; a layer stays while any image left or any running container has it.
//
// A pull runs skopeo (the registry protocol, TLS with certificate checks unless the registry is
// listed insecure, credentials from a 0600 auth file made for that pull alone) and then the
// unpacker for each layer not yet unpacked, as child processes with a fixed environment. pull()
// blocks until both are done: the agent calls it off its loop. Pulls are one at a time (the
// layout's index is one file); list() may be called meanwhile.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/image_ref.h"

namespace allot::agent {

using model::ImageRef;
using model::isSha256Digest;
using model::parseImageRef;

// What an image's config says a container runs by default (the OCI image config's fields).
struct ImageConfig {
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // KEY=VALUE
  std::string workingDir;
  std::string user;
};

struct StoredImage {
  std::string ref;                  // as pulled (ImageRef::str())
  std::string digest;               // the manifest's, sha256:<hex>: what a rerun pins
  std::vector<std::string> layers;  // hex digests, base first
  ImageConfig config;
  int64_t bytes = 0;       // compressed layers, as the manifest gives them
  int64_t lastUsedMs = 0;  // when it was pulled or a job last took it (find()); eviction order
  // The logins (PullLogin::fingerprint()) that fetched it; empty when it was fetched without
  // one. An image fetched with a login is handed to a job with another login, or none, only after
  // that job's own pull of it succeeds: the registry decides who may have it, not what this host
  // happens to hold (Kubernetes leaves this to the AlwaysPullImages admission plugin). The whole
  // login counts, password included: a username alone is no proof.
  std::vector<std::string> accounts;
};

// A team's login to a registry, for one pull (model::DesiredJob::RegistryAuth).
struct PullLogin {
  std::string registry, username, password;
  // "USERNAME:" and a keyed hash of the whole login: who fetched an image, as its record keeps
  // it, without keeping the password (the key is the store's own, kept beside it).
  std::string fingerprint(const std::string& key) const;
};

// What evict() and remove() took away.
struct Removal {
  std::vector<std::string> refs;  // the images removed
  int64_t freedBytes = 0;         // blobs and unpacked layers no image left needs
};

struct ImageStoreOptions {
  std::string root;
  std::string skopeo = "/usr/bin/skopeo";
  std::string unpacker;  // allot-layer-unpack
  // host:port of registries reached over plain HTTP (and without certificate checks): loopback
  // registries in tests, ones an admin lists (allot-agent --insecure-registry). Only a registry
  // listed here may be on this host or its link (see pull()).
  std::vector<std::string> insecureRegistries;
  // Most bytes the store may take (blobs and unpacked layers); 0 for no bound.
  int64_t budgetBytes = 0;
  // Milliseconds since the epoch, for last-use times (tests set their own).
  std::function<int64_t()> nowMs;
};

// How far a pull has got, for `allot job show` while it runs: bytes of the image's blobs fetched
// and in all (0 = not known yet: before the manifest is read, or for a multi-platform index).
// Written by the pulling thread, read by any.
// Set `cancel` to stop the pull: its child is killed and pull() answers Unavailable.
struct PullProgress {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> total{0};
  std::atomic<bool> cancel{false};
};

class ImageStore {
 public:
  explicit ImageStore(ImageStoreOptions options);

  // Fetches `ref` (what is not here yet), unpacks its layers and records it. A registry named by
  // a loopback or link-local address, or by a name that resolves to one (localhost, a cloud's
  // metadata service at 169.254.169.254), is refused unless listed in insecureRegistries: a
  // reference must not make the host fetch from itself. (Defence in depth: which registries a
  // team may use at all is allotd's allow-list.) `login`: the team's credentials for the
  // registry, written to an auth file of this pull's own (root's, 0600) and removed after; null
  // for none. Errors: NotFound
  // "image not found: REF" (no such repository, tag or digest), Unavailable (the registry does
  // not answer, the disk is full: worth retrying), InvalidArgument (a digest mismatch, a
  // manifest or layer that is not what it claims: never run).
  // `progress`, when given, is kept up to date while the blobs come in.
  // Once it is recorded, images are evicted down to the budget, sparing this one and `keep`
  // (references other jobs wait for).
  Result<StoredImage> pull(const ImageRef& ref, const PullLogin* login = nullptr,
                           PullProgress* progress = nullptr,
                           const std::set<std::string>& keep = {});
  // What an earlier pull of `ref` recorded, if its layers are all still unpacked here and a job
  // with `login` (null for none) may have it without asking the registry (see
  // StoredImage::accounts); nullopt otherwise. Asks no registry. A found image is marked used now
  // (to the minute) and is not evicted before the next two setInUse() calls (its job starts in
  // between).
  std::optional<StoredImage> find(const ImageRef& ref, const PullLogin* login = nullptr);
  // The images running jobs use (references, and the layers their containers mount: a job
  // re-adopted after a restart names both), from the agent's loop after it started its jobs.
  void setInUse(std::set<std::string> refs, std::set<std::string> layers);
  // Removes the least recently used images no job uses until the store fits its budget; an
  // image in `keep` stays.
  Result<Removal> evict(const std::set<std::string>& keep = {});
  // Removes every image no job uses (`allot image prune`).
  Result<Removal> prune();
  // Bytes the store takes now: its blobs and its unpacked layers.
  int64_t diskBytes() const;
  int64_t budgetBytes() const { return o_.budgetBytes; }
  // How many prunes allotd asked for have been done here (`allot image prune`), kept in the
  // store so that an agent's restart does not prune again.
  int64_t prunesDone() const;
  void setPrunesDone(int64_t n);
  // The directory the layers are unpacked under (ContainerImage::layersRoot).
  std::string layersRoot() const { return o_.root + "/layers"; }
  // The lower directories of an overlay of `image`, topmost first (overlayfs' lowerdir order).
  std::vector<std::string> lowerDirs(const StoredImage& image) const;
  std::vector<StoredImage> list() const;

 private:
  // Runs argv to its end or `timeout` (then kills its process group); its output's tail and exit
  // status.
  // `whileWaiting` is called every few milliseconds while the child runs; `keepBytes` of its
  // output's end are kept in *errorTail; `cancel`, once true, stops the child.
  Status runChild(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                  std::string* errorTail, int* exitCode,
                  const std::function<void()>& whileWaiting = {}, size_t keepBytes = 2048,
                  const std::atomic<bool>* cancel = nullptr);
  // The registry's manifest of `ref` (skopeo inspect --raw), for the bytes a pull will fetch:
  // the sizes of its config and of the layers not here yet; 0 when it cannot tell.
  int64_t bytesToFetch(const ImageRef& ref, const std::vector<std::string>& registryFlags);
  // Bytes in the layout's blob directory now (finished blobs and skopeo's partial ones).
  int64_t blobBytes() const;
  Status unpackLayer(const std::string& hex);
  Result<StoredImage> resolve(const ImageRef& ref, const std::string& key);
  // What an earlier pull of `ref` recorded, whatever is left of it (under records_).
  std::optional<StoredImage> readRecordLocked(const ImageRef& ref) const;
  // Writes `image`'s record (under records_).
  Status writeRecordLocked(const StoredImage& image);
  // Removes the images no job uses, least recently used first, sparing `keep`: every one
  // (`budget` nullopt) or until the store fits `budget` bytes; then the blobs and layers nothing
  // left needs. Under pulling_.
  Result<Removal> removeUnused(std::optional<int64_t> budget, const std::set<std::string>& keep);
  // Drops from the layout's index the manifests no record names, then the blobs and unpacked
  // layers that no record and no running container needs. Under pulling_.
  Status collectGarbage();
  int64_t nowMs() const;

  ImageStoreOptions o_;
  std::string loginKey_;        // keys PullLogin::fingerprint (root/login.key, made once)
  mutable std::mutex pulling_;  // one pull, eviction or prune at a time
  // Records, and what is in use: find() on the agent's loop and removals on the pulling thread.
  mutable std::mutex records_;
  std::set<std::string> inUseRefs_, inUseLayers_;
  std::set<std::string> pinned_, pinnedBefore_;  // handed out by find() or pull(), see find()
};

}  // namespace allot::agent
