#include "result_table.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier::cli {
namespace {

std::string cell(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.4g", value.get<double>());
    return text;
  }
  return value.dump();
}

/// A CSV field: strings with a comma or a quote are quoted (RFC 4180).
std::string csv_field(const nlohmann::ordered_json& value) {
  if (!value.is_string()) return value.dump();
  const std::string text = value.get<std::string>();
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::ofstream open_for_writing(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw ConfigError("cannot write " + path);
  return out;
}

}  // namespace

void print_table(std::ostream& out, const nlohmann::ordered_json& rows) {
  if (rows.empty()) return;
  std::vector<std::string> keys;
  for (const auto& item : rows.front().items()) keys.push_back(item.key());
  std::vector<std::size_t> widths;
  for (const std::string& key : keys) {
    std::size_t width = key.size();
    for (const auto& row : rows) width = std::max(width, cell(row.at(key)).size());
    widths.push_back(width);
  }
  for (std::size_t c = 0; c < keys.size(); ++c)
    out << (c ? "  " : "") << std::setw(static_cast<int>(widths[c])) << keys[c];
  out << '\n';
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < keys.size(); ++c) {
      out << (c ? "  " : "") << std::setw(static_cast<int>(widths[c])) << cell(row.at(keys[c]));
    }
    out << '\n';
  }
}

void write_csv(const std::string& path, const nlohmann::ordered_json& rows) {
  std::ofstream out = open_for_writing(path);
  if (!rows.empty()) {
    bool first = true;
    for (const auto& item : rows.front().items()) {
      out << (first ? "" : ",") << item.key();
      first = false;
    }
    out << '\n';
    for (const auto& row : rows) {
      first = true;
      for (const auto& item : row.items()) {
        out << (first ? "" : ",") << csv_field(item.value());
        first = false;
      }
      out << '\n';
    }
  }
  out.flush();
  if (!out) throw ConfigError("cannot write " + path);
}

void write_json(const std::string& path, const nlohmann::ordered_json& value) {
  std::ofstream out = open_for_writing(path);
  out << value.dump(2) << '\n';
  out.flush();
  if (!out) throw ConfigError("cannot write " + path);
}

}  // namespace kvtier::cli
