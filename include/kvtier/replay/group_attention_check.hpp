#pragma once
// The replay's attention check on one KV cache group (any kind but a Mamba
// state, any page format): the decode attention the next token of each
// running request would compute over the group's pages — full, its sliding
// window or its chunk, an MLA latent — through the group's real block table
// (null pages where the window left them) on the runtime's stream, compared
// with dense attention over the values the pages must hold (GroupKvFill).
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/replay/group_kv_fill.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::replay {

class GroupAttentionCheck {
 public:
  struct Sequence {
    g1::OwnerId owner;
    const ActiveSequence* sequence = nullptr;
    std::size_t length = 0;  // tokens whose K/V the group's pages hold
    /// Decoding: its last token was appended and written this step, and the
    /// manager's computed length is one less (the query is that last token).
    /// Prefilling: the manager computed all `length` (the query is the next token).
    bool decoding = false;
  };

  GroupAttentionCheck(session::Session& session, std::size_t group, const GroupKvFill& fill);

  /// Attends over `layer` of each sequence that has something to attend to
  /// (a chunk the next token starts afresh has nothing). Returns how many
  /// sequences were checked and the indexes (into `sequences`) whose output
  /// differs from dense attention.
  struct Outcome {
    std::size_t checked = 0;
    std::vector<std::size_t> mismatched;
  };
  Outcome run(std::span<const Sequence> sequences, std::uint32_t layer, std::uint64_t seed);

 private:
  /// One kernel call over `picked` (all decoding, or all prefilling).
  void run_batch(std::span<const Sequence> sequences, const std::vector<std::size_t>& picked, bool decoding,
                 std::uint32_t layer, std::uint64_t seed, Outcome& outcome);

  session::Session& session_;
  std::size_t group_;
  const GroupKvFill& fill_;
  kernels::AttentionSpan span_;
  std::uint32_t window_;  // the sliding window or the chunk, in tokens
};

}  // namespace kvtier::replay
