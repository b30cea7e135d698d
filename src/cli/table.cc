#include "cli/table.h"

#include <algorithm>

#include "common/hex.h"

namespace allot::cli {
namespace {

void pad(std::string& out, size_t n) { out.append(n, ' '); }

}  // namespace

std::string oneLine(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f') {
      out += ' ';
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      appendHexByte(out, c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      // U+0080..U+009F, the C1 controls: U+009B alone starts an escape sequence on many terminals.
      const auto low = static_cast<unsigned char>(s[++i]);
      out += "\\u00";
      appendHexByte(out, low);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

size_t displayWidth(const std::string& s) {
  // Count every byte that does not continue a multi-byte sequence.
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::addRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (auto& c : cells) c = oneLine(c);
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) widths[i] = displayWidth(headers_[i]);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], displayWidth(row[i]));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) pad(text, 2);
      text += cells[i];
      if (i + 1 < cells.size()) pad(text, widths[i] - displayWidth(cells[i]));
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out;
}

void Details::add(std::string key, std::string value) {
  lines_.emplace_back(std::move(key), std::move(value));
}

void Details::addOthers(const json& object, const std::set<std::string>& shown) {
  for (const auto& [key, value] : object.items()) {
    if (shown.count(key) || value.is_null()) continue;
    std::string words = key;
    std::replace(words.begin(), words.end(), '_', ' ');
    add(words, value.is_string() ? value.get<std::string>() : value.dump());
  }
}

std::string Details::render() const {
  size_t width = 0;
  for (const auto& [k, v] : lines_) width = std::max(width, displayWidth(k));
  std::string out;
  for (const auto& [k, v] : lines_) {
    std::string text = k + ":";
    if (!v.empty()) {
      pad(text, width - displayWidth(k) + 1);
      text += oneLine(v);
    }
    out += text + "\n";
  }
  return out;
}

}  // namespace allot::cli
