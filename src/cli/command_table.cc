#include <map>

#include "cli/commands.h"

namespace allot::cli {

const std::vector<CommandAdder>& allAdders() {
  static const std::vector<CommandAdder> kAll = {
      addAuthCommands,       addOrgCommands,   addTokenCommands,   addSshKeyCommands,
      addSshCommands,        addQuotaCommands, addIdleCommands,    addImageCommands,
      addImageCacheCommands, addLeaseCommands, addProfileCommands, addSessionCommands,
      addHostCommands,       addRunCommand,    addJobCommands,     addReportCommands,
      addAuditCommands,      addDocCommands,   addConfigCommands,  addTeamImageCommands};
  return kAll;
}

const std::vector<CommandAdder>* addersFor(const std::string& word) {
  // team and project are extended by the quota and idle commands, events is the idle ones'
  // (after org's, whose team command it extends). command_table_test.cc checks each word's
  // tree against the whole one's.
  static const std::map<std::string, std::vector<CommandAdder>> kByWord = {
      {"login", {addAuthCommands}},
      {"whoami", {addAuthCommands}},
      {"team",
       {addOrgCommands, addQuotaCommands, addIdleCommands, addImageCommands, addTeamImageCommands}},
      {"user", {addOrgCommands}},
      {"project", {addOrgCommands, addQuotaCommands}},
      {"events", {addOrgCommands, addIdleCommands}},
      {"token", {addTokenCommands}},
      {"ssh-key", {addSshKeyCommands}},
      {"ssh", {addSshCommands}},
      {"ssh-config", {addSshCommands}},
      {"image", {addImageCacheCommands}},
      {"lease", {addLeaseCommands}},
      {"profile", {addProfileCommands}},
      {"session", {addSessionCommands}},
      {"host", {addHostCommands}},
      {"run", {addRunCommand}},
      {"job", {addJobCommands}},
      {"report", {addReportCommands}},
      {"audit", {addAuditCommands}},
      {"config", {addConfigCommands}},
  };
  auto it = kByWord.find(word);
  return it == kByWord.end() ? nullptr : &it->second;
}

}  // namespace allot::cli
