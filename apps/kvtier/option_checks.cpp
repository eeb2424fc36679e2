#include "option_checks.hpp"

#include <cmath>
#include <optional>
#include <string>

namespace kvtier::cli {
namespace {

/// The value as a finite double, or nullopt.
std::optional<double> number(const std::string& text) {
  double value = 0.0;
  if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value)) return std::nullopt;
  return value;
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto first = text.find_first_not_of(" \t");
        if (first != std::string::npos && text[first] == '-') return "must not be negative: " + text;
        return "";
      },
      "");
}

}  // namespace

void refuse_signed_unsigned_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_name().rfind("UINT", 0) == 0) option->check(unsigned_integer());
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_signed_unsigned_options(*command);
}

CLI::Validator unit_fraction() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto value = number(text);
        return value && *value > 0.0 && *value <= 1.0 ? "" : "must be a number in (0, 1], not " + text;
      },
      "");
}

CLI::Validator linger_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // A day at most: 1e300 seconds overflowed the sleep's clock into no linger at all.
        const auto value = number(text);
        return value && *value >= 0.0 && *value <= kMaxLingerSeconds
                   ? ""
                   : "must be a number of seconds in [0, " + std::to_string(static_cast<int>(kMaxLingerSeconds)) +
                         "], not " + text;
      },
      "");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "must not be empty" : ""; }, "");
}

}  // namespace kvtier::cli
