#pragma once
// The cast of the tests where one user's work must stay out of another's reach: teams red (alice
// and carol) and blue (bob), and one host h1 of simulated GPUs that all of them share.

#include <string>

#include "harness.h"

namespace allot::it {

class RedAndBlueCluster : public TestCluster {
 protected:
  // Creates the cast; for SetUp, after TestCluster::SetUp.
  void createRedAndBlue() {
    createTeam("red");
    createTeam("blue");
    alice_ = createUser("alice", "red");
    carol_ = createUser("carol", "red");
    bob_ = createUser("bob", "blue");
    startAgent("h1");
  }

  std::string alice_, carol_, bob_;  // their tokens
};

}  // namespace allot::it
