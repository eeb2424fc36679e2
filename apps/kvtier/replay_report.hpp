#pragma once
// What `kvtier replay` prints and writes of a report: its JSON (the --json
// file, the CSV's columns) and the text report on stdout.
#include <nlohmann/json.hpp>
#include <string>

#include "kvtier/replay/replayer.hpp"

namespace kvtier::cli {

/// Every field of `r` with the settings it ran under.
nlohmann::ordered_json report_json(const replay::ReplayReport& r, const replay::ReplayConfig& config,
                                   const std::string& workload, const std::string& runtime);
/// The report as text, from report_json's fields.
void print_report(const nlohmann::ordered_json& j);

}  // namespace kvtier::cli
