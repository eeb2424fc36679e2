#pragma once
// The one loop from a request's ActiveSequence to G1Manager calls: allocate
// (with the native backend's reuse of the resident prefix), finalize what was
// computed, decode one token at a time, release on finish or preemption. The
// script runner, the tests, the benches and the replay all drive requests
// through it, so the order of calls (docs/semantics.md §6.3) lives in one place.
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::driver {

/// What one decode step did.
struct DecodeStep {
  /// The token's MoveBlock signals, in order.
  std::vector<MoveBlock> signals;
  /// How many of them were processed: all of them unless a Use found no
  /// capacity (`acquire` says so); the token and the signals before it stay.
  std::size_t applied = 0;
  g1::G1Acquire acquire = g1::G1Acquire::ready(0);
  /// The token completed the request: its final Deref released every block.
  bool finished = false;
};

/// What bringing a request's G2-resident prefix back into G1 did.
struct SwapInOutcome {
  std::size_t registered = 0;     // blocks registered in G1 (inactive, so the allocation hits them)
  std::size_t from_lower = 0;     // of them, blocks read from a tier below G2 (G3 or G4) on the way
  std::size_t from_external = 0;  // of those, blocks from the shared store (G4)
  std::size_t manager_calls = 0;  // pin, swap-in and registration calls made
};

/// What admitting a request did.
struct Admission {
  g1::G1Acquire acquire = g1::G1Acquire::ready(0);  // ready, or capacity exhausted with nothing changed
  /// Prompt blocks found in G1 (swapped-in ones included), reused for free;
  /// with groups, every block of the groups' hit (past the prompt for a
  /// preempted request), all of which the allocation takes.
  std::size_t cached_blocks = 0;
  std::size_t swapped_in = 0;                // of those, blocks the swap-in brought back from the offload tier
  std::size_t swapped_in_from_lower = 0;     // of those, blocks read from below G2 (G3 or G4) on the way
  std::size_t swapped_in_from_external = 0;  // of those, blocks from the shared store (G4)
  /// Pages the swap-in registered in G1. With groups a hit block is a page of
  /// each group that holds it, so `swapped_in` is the blocks the swap-in
  /// added to the groups' hit, and the lower tiers' shares of them are their
  /// shares of these pages.
  std::size_t swapped_in_pages = 0;
  std::size_t allocated_to = 0;  // tokens allocated when ready: the cached ones and the first chunk
  std::size_t manager_calls = 0;
};

/// Stateless: it keeps no request, only a reference to the manager; each call
/// takes the request's owner and sequence. Contract violations throw
/// ContractError with nothing changed.
class RequestDriver {
 public:
  /// Zeroes pages a group of another precision takes (G1Manager::take_pages_to_zero).
  using PageZeroer = std::function<void(std::span<const PageId>)>;

  /// `zero_pages` runs after every allocation that handed a page to a group
  /// of another precision (the session's pool zeroes them); none: the caller
  /// drains G1Manager::take_pages_to_zero itself.
  explicit RequestDriver(g1::G1Manager& manager, PageZeroer zero_pages = {}) noexcept
      : manager_(&manager), zero_pages_(std::move(zero_pages)) {}

  g1::G1Manager& manager() const noexcept { return *manager_; }

  /// Leading full blocks of `sequence` cached in G1 now (what a native
  /// scheduler hands the backend as `reusable_prefix_blocks`).
  std::size_t resident_prefix(const ActiveSequence& sequence) const;

  /// Allocates up to `cumulative_tokens` (<= len; ContractError past it). On
  /// the first allocation of a native request the resident prefix is reused
  /// unless `reuse` says how many blocks to reuse; KVBM matches by lineage
  /// itself. Ready moves the watermark; capacity exhaustion changes nothing.
  g1::G1Acquire allocate(g1::OwnerId owner, ActiveSequence& sequence, std::size_t cumulative_tokens,
                         std::optional<std::size_t> reuse = std::nullopt);

  /// allocate(), retried while the offload tier stands in the way: a
  /// BlockedOnOffload answer, or capacity exhausted while a finished
  /// swap-out still holds quarantined pages, collects the offloads (waiting
  /// for them) and tries again. Ready or capacity exhausted with nothing
  /// quarantined; `manager_calls` counts the allocations made.
  g1::G1Acquire allocate_collecting(g1::OwnerId owner, ActiveSequence& sequence, std::size_t cumulative_tokens,
                                    std::size_t& manager_calls);

  /// Before a request's first allocation (docs/semantics.md §5.5): the blocks
  /// of its first `prompt_tokens` that sit in the offload tier right after its
  /// G1 prefix are pinned, swapped in and registered, so the allocation hits
  /// them (with groups: every group's blocks of the fixed point over G1 and
  /// the tier, G1Manager::group_swap_in_plan). A swap-in blocked on a
  /// swap-out collects it and tries once more. Nothing happens without an
  /// offload tier.
  SwapInOutcome swap_in_prefix(const ActiveSequence& sequence, std::size_t prompt_tokens);

  /// A request's first allocation: swap_in_prefix, then allocate_collecting
  /// of its cached prompt blocks (reused, free) and `chunk_tokens` more, at
  /// most its length.
  Admission admit(g1::OwnerId owner, ActiveSequence& sequence, std::size_t prompt_tokens, std::size_t chunk_tokens);

  /// Tokens [before, after) were computed: the native backend makes their
  /// blocks visible and the sequence's computed tail is promoted (#12222
  /// order). A no-op on KVBM, where blocks are visible at Use.
  void finalize(g1::OwnerId owner, ActiveSequence& sequence, std::size_t before, std::size_t after);

  /// Appends one token (`token`, or the sequence's next planned/random one)
  /// and processes its signals for `owner`. Refused with nothing changed
  /// unless the sequence is allocated up to its length and its blocks are the
  /// tail of the owner's table — then only capacity can stop a signal.
  DecodeStep decode(g1::OwnerId owner, ActiveSequence& sequence, std::optional<TokenId> token = std::nullopt);

  /// Releases the allocated blocks leaf first and resets the watermark
  /// (finish or preemption); generated tokens stay in the sequence.
  void release(g1::OwnerId owner, ActiveSequence& sequence);

 private:
  /// Hands the pages the last allocation gave a group of another precision to zero_pages_.
  void zero_reassigned_pages();
  void require_decodable(g1::OwnerId owner, const ActiveSequence& sequence) const;
  /// A manager with KV cache groups takes slots for tokens, not signals
  /// (G1Manager::allocate_slots): the same calls, its way.
  g1::G1Acquire allocate_groups(g1::OwnerId owner, ActiveSequence& sequence, std::size_t tokens,
                                std::optional<std::size_t> reuse);
  DecodeStep decode_groups(g1::OwnerId owner, ActiveSequence& sequence, std::optional<TokenId> token);

  g1::G1Manager* manager_;
  g1::ComputedPrefix computed_;  // a first allocation's probe, reused so it allocates nothing
  PageZeroer zero_pages_;
};

}  // namespace kvtier::driver
