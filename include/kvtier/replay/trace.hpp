#pragma once
// Mooncake-style request traces (data/traces/README.md): one JSON object
// per line, {"timestamp": ms, "input_length": n, "output_length": m,
// "hash_ids": [...]}, each id one 512-token prompt block. Raw tokens are not in
// the trace: the replay synthesises them so that equal ids give equal tokens,
// and therefore equal kvtier block hashes at any block size dividing 512.
#include <cstdint>
#include <istream>
#include <limits>
#include <string>
#include <vector>

#include "kvtier/core/block_hash.hpp"

namespace kvtier::replay {

/// Tokens per trace block (the Mooncake release's block size).
inline constexpr std::size_t kTraceBlockTokens = 512;

struct TraceRequest {
  double timestamp_ms = 0.0;
  std::size_t input_length = 0;
  std::size_t output_length = 0;
  std::vector<std::uint64_t> hash_ids;  // ceil(input_length / 512) of them
};

/// Reads up to `limit` requests. A line that is not such a request — not
/// JSON, a field missing or of the wrong type, a negative or non-finite
/// timestamp, an input length that does not match its ids, timestamps going
/// back, more than kMaxLineBytes (64 MiB) — is a ConfigError naming `source`
/// and the line; nothing is returned then. Blank lines are skipped.
std::vector<TraceRequest> read_trace(std::istream& in, const std::string& source,
                                     std::size_t limit = std::numeric_limits<std::size_t>::max());
/// read_trace of a file; ConfigError when it cannot be opened.
std::vector<TraceRequest> read_trace_file(const std::string& path,
                                          std::size_t limit = std::numeric_limits<std::size_t>::max());

/// The request's prompt: block id h contributes the first tokens of its 512
/// synthetic tokens (a pure function of h and the position), cut to input_length.
std::vector<TokenId> synthesize_prompt(const TraceRequest& request);

}  // namespace kvtier::replay
