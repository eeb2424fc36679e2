#pragma once
// The native backend of a manager with KV cache groups (a hybrid model: more
// than one group, or a group other than full attention): one
// GroupCoordinator, driven by requests — allocate slots, finalize what was
// computed, free — as vLLM's KVCacheManager is. Dynamo's MoveBlock signals
// name one block table per request and have no groups, so every signal call
// is refused with a ContractError that says what to use instead; offload
// tiers are not attached to such a manager yet.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "g1/common/block_manager.hpp"
#include "g1/native/groups/group_coordinator.hpp"
#include "kvtier/core/kv_event_publisher.hpp"

namespace kvtier::g1 {

class GroupedBackend final : public BlockManager {
 public:
  GroupedBackend(ModelGeometry geometry, std::uint32_t capacity, bool enable_prefix_caching,
                 KvEventPublisher& publisher);

  // The requests' calls (G1Manager's allocate_slots, finalize_computed_prefix, free_slots).
  G1Acquire allocate(OwnerId owner, const ActiveSequence& sequence, std::size_t tokens, std::size_t reuse_tokens);
  void finalize(OwnerId owner, const ActiveSequence& sequence, std::size_t computed);
  void free(OwnerId owner);
  void begin_step() noexcept { coordinator_.begin_step(); }
  std::vector<PageId> take_pages_to_zero() { return coordinator_.take_pages_to_zero(); }
  /// The owner's pages in `group` but the null page, and the pattern identity
  /// of the block each backs now, for the table's blocks [first_block,
  /// end_block) (G1Manager::group_patterns).
  GroupPatterns patterns(OwnerId owner, const ActiveSequence& sequence, std::size_t group, std::size_t first_block,
                         std::size_t end_block) const;
  const GroupCoordinator& coordinator() const noexcept { return coordinator_; }

  // Signals: refused.
  G1Acquire process(OwnerId, const MoveBlock&, std::size_t) override { refuse_signal(); }
  G1Acquire process_use(OwnerId, const UseSignal&, std::size_t) override { refuse_signal(); }
  void process_deref(OwnerId, const DerefSignal&) override { refuse_signal(); }
  void finalize_computed_prefix(OwnerId, std::size_t, std::size_t) override { refuse_signal(); }
  std::optional<std::uint64_t> reserve_decode_blocks(std::size_t) override { refuse_signal(); }
  G1Acquire process_decode(OwnerId, const MoveBlock&, std::uint64_t) override { refuse_signal(); }
  void release_decode(std::uint64_t) override { refuse_signal(); }
  std::optional<DestinationGrant> reserve_destination(OwnerId, const ActiveSequence&, double) override {
    refuse_signal();
  }
  void activate_destination(std::uint64_t) override { refuse_signal(); }
  void cancel_destination(std::uint64_t) override { refuse_signal(); }

  PrefillCost prefill_cost(const ActiveSequence& sequence) const override;
  G1Metrics metrics() const override;
  bool has_owner(OwnerId owner) const override { return coordinator_.has_owner(owner); }
  /// Group 0's table.
  std::span<const PageId> block_table(OwnerId owner) const override { return coordinator_.table(owner, 0); }
  std::span<const UniqueBlock> owned_blocks(OwnerId) const override;
  std::vector<OwnerId> owners() const override;
  /// A copy of `hash` cached for group 0.
  bool is_cached(SequenceHash hash) const override;
  std::size_t metadata_bytes() const override;
  void audit() const override { coordinator_.audit(); }
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const override;

 private:
  [[noreturn]] static void refuse_signal();
  /// The sequence's chained hashes at the hash unit (the manager's block
  /// size), a complete tail not yet promoted included; the first `limit`.
  std::vector<SequenceHash> hashes_of(const ActiveSequence& sequence, std::size_t limit = SIZE_MAX) const;
  void check_sequence(const ActiveSequence& sequence) const;
  /// Removed events of every group's evictions since the last call.
  void publish_removed();
  KvEventGroup event_group(std::size_t group) const;

  GroupCoordinator coordinator_;
  bool caching_;
  KvEventPublisher& publisher_;
};

}  // namespace kvtier::g1
