#pragma once
// Checks on command-line values that CLI11's own conversions let through:
// signs on unsigned numbers ("-1" reads as 2^64 - 1 into a 64-bit unsigned),
// NaN and out-of-range fractions, empty paths.
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// Refuses a sign on every unsigned option (CLI11 type name UINT) of `app`
/// and of its subcommands, all levels down.
void refuse_signed_unsigned_options(CLI::App& app);

/// A number in (0, 1]: NaN, 0 and negatives are refused.
CLI::Validator unit_fraction();
/// The longest a socket lingers after a run: one day.
inline constexpr double kMaxLingerSeconds = 86400.0;
/// A finite number of seconds in [0, kMaxLingerSeconds].
CLI::Validator linger_seconds();
/// A value that, when given, is not empty (a path or an endpoint).
CLI::Validator non_empty();

}  // namespace kvtier::cli
