#include "control/images/image_policy.h"

#include <gtest/gtest.h>

namespace allot::control {
namespace {

TEST(ImagePolicyTest, APrefixAllowsWhatLiesUnderItAtAComponentBoundaryOnly) {
  const std::vector<std::string> allow = {"registry:5000/ml", "registry.example.com/base/"};
  EXPECT_TRUE(imageAllowed(allow, "registry:5000/ml:1"));
  EXPECT_TRUE(imageAllowed(allow, "registry:5000/ml/pytorch:2.3"));
  EXPECT_TRUE(imageAllowed(allow, "registry:5000/ml@sha256:" + std::string(64, 'a')));
  EXPECT_TRUE(imageAllowed(allow, "registry.example.com/base/cuda:12"));
  EXPECT_FALSE(imageAllowed(allow, "registry:5000/mlevil/x:1"));
  EXPECT_FALSE(imageAllowed(allow, "registry:50001/ml/x:1"));
  EXPECT_FALSE(imageAllowed(allow, "registry:5000/other:1"));
  EXPECT_FALSE(imageAllowed({}, "registry:5000/ml:1"));
}

TEST(ImagePolicyTest, ARefusalNamesTheImageTheTeamAndWhatItMayUse) {
  auto ref = model::parseImageRef("registry:5000/other/x:1").value();
  Status none = checkImageAllowed("ml", {}, ref);
  EXPECT_EQ(none.field(), "image");
  EXPECT_NE(none.message().find("registry:5000/other/x:1"), std::string::npos) << none.message();
  EXPECT_NE(none.message().find("allot team image-allow set ml"), std::string::npos);
  Status some = checkImageAllowed("ml", {"registry:5000/ml/"}, ref);
  EXPECT_NE(some.message().find("under registry:5000/ml/"), std::string::npos) << some.message();
  EXPECT_TRUE(checkImageAllowed("ml", {"registry:5000/other"}, ref).ok());
}

TEST(ImagePolicyTest, PrefixesMustStartWithARegistryAndHoldOnlyReferenceCharacters) {
  EXPECT_TRUE(validateImageAllow({}).ok());
  EXPECT_TRUE(validateImageAllow({"registry:5000/ml/", "r.example.com", "localhost/x"}).ok());
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{""},
                                             {"ml/"},
                                             {"/registry:5000/ml"},
                                             {"registry:5000//ml"},
                                             {"registry:5000/ml x"},
                                             {"registry:5000/ml\n"},
                                             {"r.example.com/a", "r.example.com/a"},
                                             {std::string(300, 'a') + ".com"}}) {
    Status st = validateImageAllow(bad);
    EXPECT_FALSE(st.ok()) << bad.front();
    EXPECT_EQ(st.field(), "allow");
  }
  EXPECT_FALSE(
      validateImageAllow(std::vector<std::string>(kMaxImageAllowPrefixes + 1, "a.b")).ok());
}

}  // namespace
}  // namespace allot::control
