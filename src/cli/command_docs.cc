#include "cli/command_docs.h"

#include <functional>
#include <vector>

namespace allot::cli {
namespace {

std::vector<CLI::App*> commandsOf(CLI::App* at) {
  return at->get_subcommands([](CLI::App* c) { return !c->get_name().empty(); });
}

std::vector<const CLI::Option*> flagsOf(const CLI::App* at) {
  return at->get_options([at](const CLI::Option* o) {
    return o != at->get_help_ptr() && o != at->get_help_all_ptr() && !o->get_positional();
  });
}

// Every command in the tree, depth first, with its path of names under the root.
void walk(CLI::App* at, const std::string& path,
          const std::function<void(CLI::App*, const std::string&)>& fn) {
  fn(at, path);
  for (auto* c : commandsOf(at))
    walk(c, path.empty() ? c->get_name() : path + " " + c->get_name(), fn);
}

// The words a flag is typed as ("--output -o"), for completion.
std::string flagWords(const CLI::Option* o) {
  std::string out;
  for (const auto& n : o->get_lnames()) out += (out.empty() ? "--" : " --") + n;
  for (const auto& n : o->get_snames()) out += (out.empty() ? "-" : " -") + n;
  return out;
}

// Roff text: backslashes and hyphens escaped, line breaks kept, and a line that would start with
// a control character ('.' or '\'') made plain.
std::string roff(const std::string& text) {
  std::string out;
  bool lineStart = true;
  for (char c : text) {
    if (lineStart && (c == '.' || c == '\'')) out += "\\&";
    lineStart = false;
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c == '\n') {
      out += "\n.br\n";
      lineStart = true;
    } else {
      out += c;
    }
  }
  return out;
}

std::string flagSynopsis(const CLI::Option* o) {
  std::string names;
  for (const auto& n : o->get_snames()) names += (names.empty() ? "" : ", ") + ("-" + n);
  for (const auto& n : o->get_lnames()) names += (names.empty() ? "" : ", ") + ("--" + n);
  std::string out = "\\fB" + roff(names) + "\\fR";
  if (o->get_items_expected_min() > 0) out += " \\fI" + roff(o->get_type_name()) + "\\fR";
  return out;
}

}  // namespace

std::string bashCompletion(CLI::App& app) {
  std::string paths, cases;
  const std::string global = [&] {
    std::string g;
    for (const auto* o : flagsOf(&app)) g += (g.empty() ? "" : " ") + flagWords(o);
    return g;
  }();
  walk(&app, "", [&](CLI::App* at, const std::string& path) {
    const std::string key = path.empty() ? "" : "/" + path;
    std::string key2;
    for (char c : key) key2 += c == ' ' ? '/' : c;
    if (!key2.empty()) paths += (paths.empty() ? "" : "|") + ("\"" + key2 + "\"");
    std::string words;
    for (auto* c : commandsOf(at)) words += (words.empty() ? "" : " ") + c->get_name();
    if (at != &app) {
      for (const auto* o : flagsOf(at)) words += (words.empty() ? "" : " ") + flagWords(o);
    }
    words += (words.empty() ? "" : " ") + global + " --help";
    cases += "    \"" + key2 + "\") candidates=\"" + words + "\" ;;\n";
  });
  return "# bash completion for allot, written by `allot completion bash` from the CLI's own\n"
         "# definitions. Load it with: source <(allot completion bash)\n"
         "# (No local is named path or words: zsh runs this too, where those are special.)\n"
         "_allot() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" at=\"\" w i candidates\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    w=\"${COMP_WORDS[i]}\"\n"
         "    [[ \"$w\" == \"--\" ]] && return 0  # the job's own command follows\n"
         "    case \"$at/$w\" in\n"
         "      " +
         paths +
         ") at=\"$at/$w\" ;;\n"
         "    esac\n"
         "  done\n"
         "  case \"$at\" in\n" +
         cases +
         "  esac\n"
         "  COMPREPLY=($(compgen -W \"$candidates\" -- \"$cur\"))\n"
         "}\n"
         "complete -F _allot allot\n";
}

std::string zshCompletion(CLI::App& app) {
  return "#compdef allot\n"
         "# zsh completion for allot, through zsh's bash completion support. Load it with:\n"
         "# source <(allot completion zsh)\n"
         "# compdef, which bash's `complete` becomes, comes with zsh's completion system: load it\n"
         "# unless the shell's own set-up already did.\n"
         "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit -i; }\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         bashCompletion(app);
}

std::string manPage(CLI::App& app, const std::string& version) {
  std::string out = ".TH ALLOT 1 \"\" \"allot " + roff(version) +
                    "\" \"Allot manual\"\n"
                    ".SH NAME\n"
                    "allot \\- " +
                    roff(app.get_description().substr(app.get_description().find(':') + 2)) +
                    "\n"
                    ".SH SYNOPSIS\n"
                    ".B allot\n"
                    "[\\fIGLOBAL FLAGS\\fR] \\fICOMMAND\\fR [\\fIFLAGS\\fR] [\\fIARGS\\fR]\n"
                    ".SH GLOBAL FLAGS\n"
                    "They may come before or after the command.\n";
  for (const auto* o : flagsOf(&app))
    out += ".TP\n" + flagSynopsis(o) + "\n" + roff(o->get_description()) + "\n";
  out += ".SH COMMANDS\n";
  walk(&app, "", [&](CLI::App* at, const std::string& path) {
    if (at == &app) return;
    out += ".SS \"allot " + roff(path) + "\"\n" + roff(at->get_description()) + "\n";
    const CLI::App* cat = at;
    for (const auto* o : cat->get_options([](const CLI::Option* p) { return p->get_positional(); }))
      out += ".TP\n\\fI" + roff(o->get_name()) + "\\fR\n" + roff(o->get_description()) + "\n";
    for (const auto* o : flagsOf(at))
      out += ".TP\n" + flagSynopsis(o) + "\n" + roff(o->get_description()) + "\n";
    if (!at->get_footer().empty()) out += ".PP\n" + roff(at->get_footer()) + "\n";
  });
  if (!app.get_footer().empty()) out += ".SH FILES\n" + roff(app.get_footer()) + "\n";
  out +=
      ".SH SEE ALSO\n"
      "\\fBallot \\-\\-help\\fR, \\fBallot\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR; docs/cli.md in "
      "the "
      "Allot sources.\n";
  return out;
}

}  // namespace allot::cli
