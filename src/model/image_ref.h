#pragma once
// An OCI image reference, as users write it: REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST], e.g.
// `registry:5000/ml/pytorch:2.3` or `registry:5000/ml/pytorch@sha256:<64 hex>`. The grammar is
// the distribution project's (docker/distribution reference), with one difference: the registry
// must be named. Allot reaches only registries an admin allows, so there is no default registry
// to fall back on (Docker's docker.io): `pytorch:2.3` is refused with the form to use.

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace allot::model {

struct ImageRef {
  std::string registry;    // host[:port]
  std::string repository;  // path components, e.g. ml/pytorch
  std::string tag;         // "" when only a digest is given
  std::string digest;      // "sha256:<64 hex>" when pinned; "" otherwise

  // REGISTRY/REPOSITORY[:TAG][@DIGEST], with the tag "latest" when neither was given.
  std::string str() const;
  // What skopeo is given: docker://REGISTRY/REPOSITORY:TAG or @DIGEST (the digest wins).
  std::string transport() const;
};

// "sha256:" and 64 lower-case hex digits: a pinned digest, as OCI writes them.
bool isSha256Digest(std::string_view digest);

// A CUDA version as NVIDIA_REQUIRE_CUDA's "cuda>=X.Y" names it: a dotted version
// (common/version.h: "12", "12.1", "11.8.0").
bool isCudaRequirement(std::string_view version);
// The lowest CUDA an image's environment (KEY=VALUE entries) declares it needs: the version in
// NVIDIA_REQUIRE_CUDA's "cuda>=X.Y" (NVIDIA's images' form, e.g. "cuda>=12.1 brand=tesla,...");
// "" when it declares none or none this grammar reads.
std::string cudaRequirementOf(const std::vector<std::string>& env);

// Parses and validates `text` (at most 255 characters of repository name, as registries allow);
// the error names what is wrong and the form to use.
Result<ImageRef> parseImageRef(const std::string& text);

}  // namespace allot::model
