#pragma once
// Table: the CLI's human output. Columns are aligned on display width (UTF-8 aware), separated by
// two spaces, with no trailing blanks; a cell is made one line and safe for a terminal (oneLine).
// A plain value: build, then render once.

#include <set>
#include <string>
#include <vector>

#include "cli/json.h"

namespace allot::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  // A row shorter than the header is padded with empty cells; a longer one is an error of the
  // caller and is cut to the header's width.
  void addRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Key/value lines for one object ("name:   alice"), keys aligned.
class Details {
 public:
  void add(std::string key, std::string value);
  // The fields of `object` not in `shown` (ones this CLI does not know yet, from a newer server),
  // so that nothing the server says is hidden: the key in words ("health checked at"), strings
  // as they are, others as JSON; null ones (nothing to say) left out.
  void addOthers(const json& object, const std::set<std::string>& shown);
  std::string render() const;

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

// `s` as one line that a terminal only prints: line breaks and tabs become spaces, every other
// control character (C0, DEL and C1) a visible escape ("\x1b", "\u009b"). What the server shows
// was often written by someone else (a team-mate's lease reason, a host's GPU model), and an
// escape sequence in it would otherwise rewrite the screen, hide rows or set the clipboard.
std::string oneLine(const std::string& s);

// How many terminal columns `s` takes: UTF-8 code points, not bytes.
size_t displayWidth(const std::string& s);

}  // namespace allot::cli
