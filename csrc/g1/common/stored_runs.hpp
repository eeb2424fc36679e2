#pragma once
// The Device Stored events of one G1 operation, coalesced into runs.
#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kvtier/core/kv_event_publisher.hpp"

namespace kvtier::g1::detail {

/// Builds the Stored runs of one operation in block order: each block that
/// became visible joins the current run (block k's parent is block k-1);
/// `gap()` ends it (a reused or already-visible block, which parents the next
/// run). A run also ends where the presence of local hashes or token ids
/// changes: a swap-in's blocks come from several Uses. Call `gap()` last.
class StoredRuns {
 public:
  /// `expected`: an upper bound of the blocks this operation adds (one allocation per run).
  StoredRuns(KvEventPublisher& publisher, std::size_t expected) : publisher_(publisher), expected_(expected) {}
  StoredRuns(const StoredRuns&) = delete;
  StoredRuns& operator=(const StoredRuns&) = delete;

  // Inline: called per block on the allocator's hot path.
  /// `token_ids` empty: the block has none (a block holds at least two tokens).
  void add(const std::optional<SequenceHash>& parent, StoredBlock block, bool has_local,
           std::span<const TokenId> token_ids) {
    if (!publisher_.has_sinks()) return;  // nothing listens: build nothing
    const bool has_token_ids = !token_ids.empty();
    if (!run_.blocks.empty() && (run_has_local_ != has_local || run_.token_ids.has_value() != has_token_ids)) gap();
    if (run_.blocks.empty()) start_run(parent, has_local, token_ids.size());
    if (has_token_ids) run_.token_ids->append(token_ids);
    run_.blocks.push_back(block);
    ++added_;
  }
  void gap() {
    if (!run_.blocks.empty()) publisher_.publish_stored(StorageTier::Device, std::exchange(run_, KvStored{}));
  }

 private:
  /// `ids_per_block` 0: the run carries no token ids.
  void start_run(const std::optional<SequenceHash>& parent, bool has_local, std::size_t ids_per_block);

  KvEventPublisher& publisher_;
  std::size_t expected_;
  std::size_t added_ = 0;
  bool run_has_local_ = false;
  KvStored run_;
};

/// A block's token ids as StoredRuns::add takes them (empty: none given).
inline std::span<const TokenId> token_ids_of(const std::vector<TokenId>* ids) {
  return ids ? std::span<const TokenId>(*ids) : std::span<const TokenId>{};
}
inline std::span<const TokenId> token_ids_of(const std::optional<std::vector<TokenId>>& ids) {
  return ids ? std::span<const TokenId>(*ids) : std::span<const TokenId>{};
}

}  // namespace kvtier::g1::detail
