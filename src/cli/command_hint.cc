#include "cli/command_hint.h"

#include <algorithm>

namespace allot::cli {
namespace {

std::vector<CLI::App*> commandsOf(CLI::App* at) {
  return at->get_subcommands([](CLI::App* c) { return !c->get_name().empty(); });
}

// An option given as its own word whose value is the next word (`--server URL`), looked up
// where CLI11 would: on this command and the ones above it (fallthrough).
bool takesNextWord(CLI::App* at, const std::string& word) {
  if (word.find('=') != std::string::npos) return false;
  // Short flags run together (`-o json` vs `-ojson`): only a lone `-x` can take the next word.
  if (word.size() > 2 && word[1] != '-') return false;
  for (CLI::App* a = at; a != nullptr; a = a->get_parent()) {
    if (const CLI::Option* o = a->get_option_no_throw(word)) return o->get_items_expected_min() > 0;
  }
  return false;
}

std::string namesOf(const std::vector<CLI::App*>& commands) {
  std::vector<std::string> names;
  for (auto* c : commands) names.push_back(c->get_name());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The commands one or two levels under `at` that `word` may have meant: close in spelling
// (`jbo` for `job`, `lsit` for `list`), or a command one level further down (`allot list`).
std::vector<std::string> closest(CLI::App* at, const std::string& word) {
  const size_t most = word.size() <= 3 ? 1 : 2;
  std::vector<std::pair<size_t, std::string>> near;
  for (auto* c : commandsOf(at)) {
    const std::string& name = c->get_name();
    const size_t d = editDistance(word, name);
    const bool prefix = word.size() >= 2 && name.rfind(word, 0) == 0;
    if (d <= most || prefix) near.emplace_back(prefix ? 0 : d, name);
    for (auto* below : commandsOf(c)) {
      if (below->get_name() == word) near.emplace_back(0, name + " " + word);
    }
  }
  std::sort(near.begin(), near.end());
  std::vector<std::string> out;
  for (const auto& [d, name] : near) {
    if (out.size() < 4 && (out.empty() || d <= near.front().first)) out.push_back(name);
  }
  return out;
}

}  // namespace

size_t editDistance(const std::string& a, const std::string& b) {
  // Damerau-Levenshtein (optimal string alignment) over three rows.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

std::string commandHint(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  std::string path = "allot";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (word.size() > 1 && word[0] == '-') {
      if (takesNextWord(at, word)) ++i;
      continue;
    }
    const auto commands = commandsOf(at);
    if (commands.empty()) return "";  // an argument of a command: not ours to judge
    auto named = std::find_if(commands.begin(), commands.end(),
                              [&](CLI::App* c) { return c->get_name() == word; });
    if (named != commands.end()) {
      at = *named;
      path += " " + word;
      continue;
    }
    const auto near = closest(at, word);
    if (near.empty())
      return "no command `" + path + " " + word + "`; the commands of `" + path +
             "` are: " + namesOf(commands);
    std::string options;
    for (size_t k = 0; k < near.size(); ++k)
      options += std::string(k == 0                 ? ""
                             : k + 1 == near.size() ? " or "
                                                    : ", ") +
                 "`" + path + " " + near[k] + "`";
    return "no command `" + path + " " + word + "`; did you mean " + options + "?";
  }
  if (at->get_require_subcommand_min() > 0 && !commandsOf(at).empty())
    return "`" + path + "` needs a command: " + namesOf(commandsOf(at)) + " (see `" + path +
           " --help`)";
  return "";
}

}  // namespace allot::cli
