#pragma once
// The replay's proof that its pages serve attention as an engine reads them:
// one decode step of paged attention over running requests, through the
// session's device block tables (BlockTableBuilder, one copy per step) on the
// runtime's stream (the CUDA kernel, or its CPU reference on HostRuntime),
// compared with dense attention over the K/V their tokens must hold.
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/g1/g1_types.hpp"
#include "kvtier/memory/runtime.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::replay {

class AttentionCheck {
 public:
  /// The widest block table checked, in tokens: the kernel keeps a
  /// sequence's scores in shared memory (kv_kernels.hpp), sized by the table.
  static constexpr std::size_t kMaxTokens = 32768;

  /// One running request: its owner (whose block table is read) and the K/V
  /// identity of each of its first `identities.size()` tokens (token_kv_identity).
  struct Sequence {
    g1::OwnerId owner;
    std::vector<std::uint64_t> identities;
  };

  /// Room for `max_sequences` per step; query heads = 2 x the KV heads (GQA).
  AttentionCheck(session::Session& session, std::uint32_t max_sequences);

  /// Attends with a query made from `seed` over `layer` of each sequence's
  /// pages and returns the indexes (into `sequences`) whose output differs
  /// from dense attention over their tokens' K/V. ContractError for more
  /// sequences than it was made for, an empty sequence, an unknown owner, a
  /// table shorter than the sequence or wider than kMaxTokens.
  std::vector<std::size_t> run(std::span<const Sequence> sequences, std::uint32_t layer, std::uint64_t seed);

  std::uint32_t max_sequences() const noexcept { return max_sequences_; }
  std::uint32_t query_heads() const noexcept { return query_heads_; }

 private:
  /// softmax(scale q K^T) V over the synthesized K/V of one sequence.
  void dense_attention(const Sequence& sequence, std::uint32_t layer, const float* query, float* out);

  session::Session& session_;
  std::uint32_t max_sequences_;
  std::uint32_t query_heads_;
  std::size_t floats_;  // query or output floats for max_sequences_
  memory::PinnedBuffer query_host_;
  memory::PinnedBuffer out_host_;
  memory::DeviceBuffer query_;
  memory::DeviceBuffer out_;
  std::vector<float> keys_, values_, scores_, expected_;
};

}  // namespace kvtier::replay
