#pragma once
// ProfileService: session profiles (docs/sessions.md), the templates sessions are made from.
// Names are unique cluster-wide. Platform admins define platform-wide ones (team ""), team-admins
// their team's; a profile the caller may not see is NotFound. Created and replaced whole;
// createdBy/createdAt are set here (a replacement keeps the original's). The rules a profile
// keeps are in control/profile.h; who may do what in control/authz.h.
//
// Owns: the profiles. Reads: the directory's teams. Threading: allotd's I/O thread.

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/principal.h"
#include "model/model.h"

namespace allot::control {

class ProfileService {
 public:
  ProfileService(const Clock& clock, const std::map<std::string, model::Team>& teams)
      : clock_(clock), teams_(teams) {}

  void load(const std::vector<model::Profile>& stored);

  Result<Change<model::Profile>> create(const Principal& p, model::Profile profile);
  Result<Change<model::Profile>> replace(const Principal& p, const std::string& name,
                                         model::Profile profile);
  Result<Change<model::Profile>> remove(const Principal& p, const std::string& name);
  // The profiles `p` may use, by name.
  std::vector<model::Profile> list(const Principal& p) const;
  Result<model::Profile> get(const Principal& p, const std::string& name) const;
  // The profile named, whoever asks; null when there is none. For the sessions service, which
  // checks who may use it.
  const model::Profile* find(const std::string& name) const {
    auto it = profiles_.find(name);
    return it == profiles_.end() ? nullptr : &it->second;
  }

 private:
  const Clock& clock_;
  const std::map<std::string, model::Team>& teams_;
  std::map<std::string, model::Profile> profiles_;
};

}  // namespace allot::control
