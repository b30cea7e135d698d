#include "model/image_ref.h"

#include <gtest/gtest.h>

namespace allot::model {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST(ImageRefTest, ParsesRegistryRepositoryTagAndDigest) {
  auto r = parseImageRef("registry:5000/ml/pytorch:2.3");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->registry, "registry:5000");
  EXPECT_EQ(r->repository, "ml/pytorch");
  EXPECT_EQ(r->tag, "2.3");
  EXPECT_EQ(r->digest, "");
  EXPECT_EQ(r->transport(), "docker://registry:5000/ml/pytorch:2.3");

  r = parseImageRef("127.0.0.1:5000/a/b/c@" + kDigest);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tag, "");
  EXPECT_EQ(r->digest, kDigest);
  EXPECT_EQ(r->transport(), "docker://127.0.0.1:5000/a/b/c@" + kDigest);

  r = parseImageRef("registry.example.com/team_a/my-model__v2:v1.0-rc_1@" + kDigest);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tag, "v1.0-rc_1");
  EXPECT_EQ(r->transport(), "docker://registry.example.com/team_a/my-model__v2@" + kDigest);

  r = parseImageRef("localhost/base");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tag, "latest");
  EXPECT_EQ(r->str(), "localhost/base:latest");
}

TEST(ImageRefTest, RefusesWhatIsNotAReferenceNamingTheProblemAndTheField) {
  struct Bad {
    std::string text, says;
  };
  for (const Bad& bad : {
           Bad{"", "empty"},
           Bad{"pytorch:2.3", "name the registry"},
           Bad{"ml/pytorch:2.3", "is not a host"},
           Bad{"registry:5000/ML/pytorch", "not a repository component"},
           Bad{"registry:5000/ml/../etc", "not a repository component"},
           Bad{"registry:5000/ml//x", "not a repository component"},
           Bad{"registry:5000/", "no repository"},
           Bad{"registry:99999/ml/x", "host[:port]"},
           Bad{"-bad.host:5000/ml/x", "host[:port]"},
           Bad{"registry:5000/ml/x:", "the tag"},
           Bad{"registry:5000/ml/x:.hidden", "the tag"},
           Bad{"registry:5000/ml/x:" + std::string(129, 'a'), "the tag"},
           Bad{"registry:5000/ml/x@sha256:abc", "digest"},
           Bad{"registry:5000/ml/x@md5:" + std::string(32, 'a'), "digest"},
           Bad{"registry:5000/ml/x@sha256:" + std::string(64, 'A'), "digest"},
           Bad{"registry:5000/ml/x y", "not a repository component"},
           Bad{"registry:5000/ml/x\n", "not a repository component"},
           Bad{"registry:5000/" + std::string(300, 'a'), "over 255"},
           Bad{std::string(600, 'a'), "too long"},
       }) {
    auto r = parseImageRef(bad.text);
    ASSERT_FALSE(r.ok()) << bad.text;
    EXPECT_NE(r.status().message().find(bad.says), std::string::npos)
        << bad.text << ": " << r.status().message();
    EXPECT_EQ(r.status().field(), "image") << bad.text;
  }
}

// NVIDIA's images declare it as nvidia-container-toolkit reads it: "cuda>=X.Y" among others.
TEST(CudaRequirement, TheCudaTermOfNvidiaRequireCudaIsRead) {
  EXPECT_EQ(cudaRequirementOf({"PATH=/usr/bin",
                               "NVIDIA_REQUIRE_CUDA=cuda>=12.1 brand=tesla,driver>=470,driver<471 "
                               "brand=unknown,driver>=470,driver<471"}),
            "12.1");
  EXPECT_EQ(cudaRequirementOf({"NVIDIA_REQUIRE_CUDA=brand=tesla,driver>=470 cuda>=11.8"}), "11.8");
  EXPECT_EQ(cudaRequirementOf({"NVIDIA_REQUIRE_CUDA=cuda>=12"}), "12");
  for (const std::vector<std::string>& none : {std::vector<std::string>{},
                                               {"PATH=/usr/bin"},
                                               {"NVIDIA_REQUIRE_CUDA="},
                                               {"NVIDIA_REQUIRE_CUDA=cuda>=twelve"},
                                               {"NVIDIA_REQUIRE_CUDA=cuda>=12.1;rm"},
                                               {"NVIDIA_REQUIRE_CUDA=cuda<12"},
                                               {"XNVIDIA_REQUIRE_CUDA=cuda>=12.1"}})
    EXPECT_EQ(cudaRequirementOf(none), "") << (none.empty() ? "" : none.front());
  EXPECT_TRUE(isCudaRequirement("11.8.0"));
  EXPECT_FALSE(isCudaRequirement(""));
  EXPECT_FALSE(isCudaRequirement("12..1"));
}

}  // namespace
}  // namespace allot::model
