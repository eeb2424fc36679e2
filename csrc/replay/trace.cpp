#include "kvtier/replay/trace.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvtier/core/bounded_line.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::replay {
namespace {

/// A fixed bijective mix: token t of block id h. Any pure function works; this
/// one spreads ids over the whole 32-bit token range.
TokenId synthetic_token(std::uint64_t id, std::size_t position) {
  std::uint64_t x = id * kTraceBlockTokens + position + 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<TokenId>(x ^ (x >> 31));
}

/// The parser quotes what it read last: a huge literal must not flood the message.
std::string shortened(std::string message) {
  constexpr std::size_t kMaxQuoted = 240;
  if (message.size() > kMaxQuoted) message = message.substr(0, kMaxQuoted) + "...";
  return message;
}

[[noreturn]] void refuse(const std::string& source, std::size_t line, const std::string& what) {
  throw ConfigError(source + ":" + std::to_string(line) + ": " + what);
}

std::size_t count_field(const nlohmann::json& object, const char* name, const std::string& source, std::size_t line) {
  if (!object.contains(name) || !object[name].is_number_unsigned()) {
    refuse(source, line, std::string("'") + name + "' must be a non-negative integer");
  }
  return object[name].get<std::size_t>();
}

}  // namespace

std::vector<TraceRequest> read_trace(std::istream& in, const std::string& source, std::size_t limit) {
  std::vector<TraceRequest> requests;
  std::string text;
  std::size_t line = 0;
  double last_timestamp = 0.0;
  while (requests.size() < limit) {
    const LineRead read = read_bounded_line(in, text);
    if (read == LineRead::End) break;
    ++line;
    if (read == LineRead::TooLong) {
      refuse(source, line, "longer than the " + std::to_string(kMaxLineBytes) + "-byte limit of a trace line");
    }
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {  // a syntax error, or a number no double holds
      refuse(source, line, "invalid JSON: " + shortened(error.what()));
    }
    if (!object.is_object()) refuse(source, line, "not a JSON object");
    TraceRequest request;
    if (!object.contains("timestamp") || !object["timestamp"].is_number())
      refuse(source, line, "'timestamp' must be a number");
    request.timestamp_ms = object["timestamp"].get<double>();
    if (!std::isfinite(request.timestamp_ms) || request.timestamp_ms < 0.0) {
      refuse(source, line, "'timestamp' must be finite and non-negative");
    }
    if (request.timestamp_ms < last_timestamp) refuse(source, line, "timestamps go back in time");
    last_timestamp = request.timestamp_ms;
    request.input_length = count_field(object, "input_length", source, line);
    request.output_length = count_field(object, "output_length", source, line);
    if (!object.contains("hash_ids") || !object["hash_ids"].is_array())
      refuse(source, line, "'hash_ids' must be a list");
    for (const auto& id : object["hash_ids"]) {
      if (!id.is_number_unsigned()) refuse(source, line, "every hash id must be a non-negative integer");
      request.hash_ids.push_back(id.get<std::uint64_t>());
    }
    if (request.input_length == 0) refuse(source, line, "'input_length' must be at least 1");
    const std::size_t blocks = (request.input_length + kTraceBlockTokens - 1) / kTraceBlockTokens;
    if (request.hash_ids.size() != blocks) {
      refuse(source, line,
             std::to_string(request.input_length) + " input tokens need " + std::to_string(blocks) +
                 " hash ids of 512 tokens, not " + std::to_string(request.hash_ids.size()));
    }
    requests.push_back(std::move(request));
  }
  if (in.bad()) throw ConfigError(source + ": read error");
  return requests;
}

std::vector<TraceRequest> read_trace_file(const std::string& path, std::size_t limit) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot open trace " + path);
  return read_trace(in, path, limit);
}

std::vector<TokenId> synthesize_prompt(const TraceRequest& request) {
  std::vector<TokenId> prompt;
  prompt.reserve(request.input_length);
  for (const std::uint64_t id : request.hash_ids) {
    for (std::size_t t = 0; t < kTraceBlockTokens && prompt.size() < request.input_length; ++t) {
      prompt.push_back(synthetic_token(id, t));
    }
  }
  return prompt;
}

}  // namespace kvtier::replay
