#pragma once
// Request streams the allocator benches replay, every block hash a real one
// (XXH3 over synthetic tokens, chained as Dynamo chains them): the issue's
// shared-half stream, and the shared Mooncake trace's hash ids expanded to
// blocks. Built once, outside any timing.
#include <cstdint>
#include <string>
#include <vector>

#include "kvtier/core/move_block.hpp"

namespace kvtier::measure {

/// One request: its full blocks' Use (hashes, local hashes, lineage hashes)
/// and the Deref that finishes it (leaf first).
struct StreamRequest {
  UseSignal use;
  DerefSignal deref;
  std::vector<TokenId> tokens;  // the full blocks' tokens (with_token_ids puts them in the Use)
};

struct RequestStream {
  std::string name;
  std::vector<StreamRequest> requests;
  std::uint32_t block_size = 16;
  std::uint32_t pages = 0;     // G1 capacity the stream runs on
  std::size_t live = 0;        // requests held at once; the oldest finishes first (FIFO)
  std::size_t blocks() const;  // full blocks over all requests
};

/// `requests` prompts of `tokens` tokens, the first half of each shared by
/// all, on `pages` pages with `live` requests held (the hot-path issue's stream:
/// 1000 x 2048 tokens, block size 16, 64 live, 16,384 pages).
RequestStream shared_half_stream(std::size_t requests, std::size_t tokens, std::uint32_t block_size, std::size_t live,
                                 std::uint32_t pages);

/// The same stream with every Use carrying its blocks' token ids (Stored
/// events then carry them too); named "<name>+token_ids".
RequestStream with_token_ids(const RequestStream& stream);

/// The first `requests` requests of a Mooncake-style JSONL trace (512-token
/// `hash_ids`; equal ids give equal tokens), as full blocks of `block_size`.
/// Empty when the file cannot be read.
RequestStream trace_stream(const std::string& path, std::size_t requests, std::uint32_t block_size, std::size_t live,
                           std::uint32_t pages);

}  // namespace kvtier::measure
