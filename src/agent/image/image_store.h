#pragma once
// The host's image cache (docs/environments.md). Under its root:
//
//   oci/            an OCI image layout that skopeo copies into: blobs by digest, so a layer two
//                   images share is fetched and stored once
//   layers/<hex>/   each layer unpacked once (allot-layer-unpack), shared by every image and job
//   images/<key>.json  what a pulled reference resolved to: its manifest digest, layers and
//                   config, for `allot image list` and for jobs
//   tmp/            skopeo's and the unpacker's scratch, on the same file system
//
// A pull runs skopeo (the registry protocol, TLS with certificate checks unless the registry is
// listed insecure, credentials from an auth file of the team's) and then the unpacker for each
// layer not yet unpacked, as child processes with a fixed environment. pull() blocks until both
// are done: the agent calls it off its loop. Pulls are one at a time (the layout's index is one
// file); list() may be called meanwhile.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "agent/image/image_ref.h"
#include "common/status.h"

namespace allot::agent {

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
  int64_t bytes = 0;  // compressed layers, as the manifest gives them
};

struct ImageStoreOptions {
  std::string root;
  std::string skopeo = "/usr/bin/skopeo";
  std::string unpacker;  // allot-layer-unpack
  // host:port of registries reached over plain HTTP (and without certificate checks): loopback
  // registries in tests, ones an admin lists (allot-agent --insecure-registry). Only a registry
  // listed here may be on this host or its link (see pull()).
  std::vector<std::string> insecureRegistries;
};

class ImageStore {
 public:
  explicit ImageStore(ImageStoreOptions options);

  // Fetches `ref` (what is not here yet), unpacks its layers and records it. A registry named by
  // a loopback or link-local address, or by a name that resolves to one (localhost, a cloud's
  // metadata service at 169.254.169.254), is refused unless listed in insecureRegistries: a
  // reference must not make the host fetch from itself. (Defence in depth: which registries a
  // team may use at all is allotd's allow-list.) `authFile`: a
  // containers-auth.json with the team's credentials for the registry, or "". Errors: NotFound
  // "image not found: REF" (no such repository, tag or digest), Unavailable (the registry does
  // not answer, the disk is full: worth retrying), InvalidArgument (a digest mismatch, a
  // manifest or layer that is not what it claims: never run).
  Result<StoredImage> pull(const ImageRef& ref, const std::string& authFile = "");
  // The lower directories of an overlay of `image`, topmost first (overlayfs' lowerdir order).
  std::vector<std::string> lowerDirs(const StoredImage& image) const;
  std::vector<StoredImage> list() const;

 private:
  // Runs argv to its end or `timeout` (then kills its process group); its output's tail and exit
  // status.
  Status runChild(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                  std::string* errorTail, int* exitCode);
  Status unpackLayer(const std::string& hex);
  Result<StoredImage> resolve(const ImageRef& ref, const std::string& key);

  ImageStoreOptions o_;
  mutable std::mutex pulling_;
};

}  // namespace allot::agent
