#pragma once
// Rows of results (JSON objects with the same keys, in order) printed as an
// aligned table and written as CSV or JSON: `kvtier bench` and `kvtier replay
// --sweep-capacity` share it, so the CSV feeds scripts/plot.sh.
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace kvtier::cli {

void print_table(std::ostream& out, const nlohmann::ordered_json& rows);
/// Throws ConfigError when the file cannot be written.
void write_csv(const std::string& path, const nlohmann::ordered_json& rows);
void write_json(const std::string& path, const nlohmann::ordered_json& value);

}  // namespace kvtier::cli
