#pragma once
// The replay's K/V: every computed token's keys and values are written into
// its slot of a G1 page through the runtime's write_kv (the CUDA kernel, or
// its CPU reference on HostRuntime), as an engine's forward pass does; a
// reused page is checked against the K/V its tokens must hold.
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::replay {

/// What a token's K/V is a function of, as real K/V is of the tokens before
/// it: the sequence hash of the block before its block (0 for the first) and
/// its block's tokens up to and including it.
std::uint64_t token_kv_identity(std::uint64_t parent_block_hash, std::span<const TokenId> block_tokens_through);

/// One token's K/V in one layer: small integers in [-8, 7], exact in every
/// dtype (fp8 e4m3 included), so the kernel and the reference store equal bytes.
void synthesize_token_kv(std::uint64_t identity, std::uint32_t layer, std::span<float> key, std::span<float> value);

class TokenKvWriter {
 public:
  /// Staging for up to `max_staged_tokens` tokens (fewer when the page
  /// geometry would make it larger than 32 MiB of pinned memory).
  explicit TokenKvWriter(memory::KvPool& pool, std::size_t max_staged_tokens = 8192);

  /// Queues one token's K/V for slot `offset` of `page`; flushes when full.
  void stage(PageId page, std::uint32_t offset, std::uint64_t identity);
  /// Writes every staged token (one write_kv per layer) and waits: call it
  /// before a page with staged tokens may change hands (released, preempted)
  /// and before pages are read. Throws the runtime's error if a write failed.
  void flush();
  std::size_t staged() const noexcept { return staged_; }

  /// The pages (in input order) whose bytes differ from the K/V of their
  /// tokens: `identities` holds block_size token identities per page.
  std::vector<PageId> find_mismatches(std::span<const PageId> pages, std::span<const std::uint64_t> identities);

  std::uint64_t tokens_written() const noexcept { return tokens_written_; }
  std::uint64_t bytes_written() const noexcept { return tokens_written_ * token_bytes_; }

 private:
  memory::KvPool& pool_;
  std::size_t row_;          // kv_heads x head_dim floats
  std::size_t capacity_;     // tokens one flush holds
  std::size_t token_bytes_;  // bytes one token occupies in a page (all layers, K and V)
  memory::Stream stream_;
  memory::PinnedBuffer keys_;    // [layer][token][row]
  memory::PinnedBuffer values_;  // [layer][token][row]
  memory::PinnedBuffer slots_;   // [token]
  std::vector<std::uint64_t> identities_;
  std::size_t staged_ = 0;
  std::uint64_t tokens_written_ = 0;
  KvLayout one_page_;                // the layout of a page read back (either kind: chunks in order)
  std::vector<std::byte> expected_;  // one page
  std::vector<float> scratch_keys_, scratch_values_;
  std::vector<std::int64_t> scratch_slots_;
};

}  // namespace kvtier::replay
