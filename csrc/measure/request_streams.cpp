#include "kvtier/measure/request_streams.hpp"

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::measure {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The Use and Deref of a prompt's full blocks, hashed the way requests are.
StreamRequest request_from_tokens(const std::vector<TokenId>& tokens, std::uint32_t block_size) {
  std::vector<BlockHashes> hashes(tokens.size() / block_size);
  hash_full_blocks(tokens, block_size, std::nullopt, hashes);
  StreamRequest request;
  std::optional<SequenceHash> parent;
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    request.use.blocks.push_back(UniqueBlock::full(hashes[i].sequence));
    request.use.local_hashes.push_back(hashes[i].local);
    request.use.plhs.emplace_back(hashes[i].sequence, parent, i);
    parent = hashes[i].sequence;
  }
  request.deref.blocks.assign(request.use.blocks.rbegin(), request.use.blocks.rend());
  request.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(hashes.size() * block_size));
  return request;
}

}  // namespace

RequestStream with_token_ids(const RequestStream& stream) {
  RequestStream out = stream;
  out.name += "+token_ids";
  for (StreamRequest& request : out.requests) {
    BlockTokenIds ids;
    for (std::size_t b = 0; b < request.use.blocks.size(); ++b) {
      const auto first = request.tokens.begin() + static_cast<std::ptrdiff_t>(b * stream.block_size);
      ids.emplace_back(first, first + stream.block_size);
    }
    request.use.token_ids = std::move(ids);
  }
  return out;
}

std::size_t RequestStream::blocks() const {
  std::size_t n = 0;
  for (const auto& request : requests) n += request.use.blocks.size();
  return n;
}

RequestStream shared_half_stream(std::size_t requests, std::size_t tokens, std::uint32_t block_size, std::size_t live,
                                 std::uint32_t pages) {
  RequestStream stream{.name = "shared_half", .requests = {}, .block_size = block_size, .pages = pages, .live = live};
  std::vector<TokenId> prompt(tokens);
  for (std::size_t r = 0; r < requests; ++r) {
    for (std::size_t t = 0; t < tokens; ++t) {
      const std::uint64_t owner = t < tokens / 2 ? 0 : r + 1;  // the first half is everyone's
      prompt[t] = static_cast<TokenId>(splitmix64(owner * 1'000'003 + t));
    }
    stream.requests.push_back(request_from_tokens(prompt, block_size));
  }
  return stream;
}

RequestStream trace_stream(const std::string& path, std::size_t requests, std::uint32_t block_size, std::size_t live,
                           std::uint32_t pages) {
  RequestStream stream{.name = "mooncake", .requests = {}, .block_size = block_size, .pages = pages, .live = live};
  try {
    for (const replay::TraceRequest& request : replay::read_trace_file(path, requests)) {
      stream.requests.push_back(request_from_tokens(replay::synthesize_prompt(request), block_size));
    }
  } catch (const ConfigError&) {
    stream.requests.clear();  // no readable trace: the bench skips this stream
  }
  return stream;
}

}  // namespace kvtier::measure
