// The CLI builds only the commands a command word needs (command_table.cc): each word's tree
// must be the whole tree's, flag for flag, and no command of the whole tree may be left out of
// the table by accident.

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "cli/commands.h"
#include "common/clock.h"

namespace allot::cli {
namespace {

// A command's shape: its options' names and, recursively, its subcommands'.
std::string shape(const CLI::App& app) {
  std::string out = app.get_name() + "(";
  for (const CLI::Option* o : app.get_options()) out += o->get_name() + " ";
  for (const CLI::App* sub : app.get_subcommands({})) out += shape(*sub);
  return out + ")";
}

struct Tree {
  std::istringstream in;
  std::ostringstream out, err;
  SystemClock clock;
  Context ctx{[](const std::string&) { return std::optional<std::string>(); }, in, out, err, clock};
  CLI::App app{"allot"};
  explicit Tree(const std::vector<CommandAdder>& adders) {
    for (CommandAdder add : adders) add(app, ctx);
  }
};

TEST(CommandTableTest, EachWordBuildsTheSameCommandAsTheWholeTree) {
  Tree whole(allAdders());
  const std::set<std::string> needEverything = {"completion", "man"};
  for (const CLI::App* top : whole.app.get_subcommands({})) {
    const std::string word = top->get_name();
    const auto* adders = addersFor(word);
    if (needEverything.count(word)) {
      EXPECT_EQ(adders, nullptr) << word << " lists every command";
      continue;
    }
    ASSERT_NE(adders, nullptr) << "`allot " << word << "` is missing from command_table.cc";
    Tree part(*adders);
    const CLI::App* mine = nullptr;
    for (const CLI::App* sub : part.app.get_subcommands({}))
      if (sub->get_name() == word) mine = sub;
    ASSERT_NE(mine, nullptr) << word;
    EXPECT_EQ(shape(*mine), shape(*top)) << word;
  }
  EXPECT_EQ(addersFor("nosuchcommand"), nullptr);
}

}  // namespace
}  // namespace allot::cli
