#include "g1/common/backend_common.hpp"
#include "kvtier/core/expects.hpp"

#include <algorithm>
#include <variant>

namespace kvtier::g1::detail {
namespace {

/// Visitor of several lambdas (std::visit over a MoveBlock).
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;  // clang before 17 deduces no aggregate CTAD

}  // namespace

G1Acquire BackendCommon::process(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) {
  return std::visit(Overloaded{
                        [&](const UseSignal& s) { return process_use(owner, s, reusable_prefix_blocks); },
                        [&](const DerefSignal& s) {
                          process_deref(owner, s);
                          return G1Acquire::ready(s.blocks.size());
                        },
                        [&](const PromoteSignal& s) {
                          promote(owner, s);
                          return G1Acquire::ready(1);
                        },
                    },
                    signal);
}

void BackendCommon::attach_offload(OffloadTier* tier) {
  KVTIER_EXPECTS(tier_ == nullptr, "an offload tier is attached already");
  tier_ = tier;
  on_offload_attached();
}

G1Acquire BackendCommon::blocked_on(std::uint64_t transfer) const {
  return G1Acquire{.kind = G1Acquire::Kind::BlockedOnOffload,
                   .count = 0,
                   .offload_id = transfer,
                   .deadline_ms = tier_->earliest_deadline_ms().value_or(0.0)};
}

PrefillCost BackendCommon::prefill_cost_of(std::size_t overlap, std::size_t active, std::size_t blocks,
                                           std::size_t length) const {
  PrefillCost cost;
  cost.new_blocks = blocks - overlap;
  cost.cached_tokens = std::min(overlap * block_size_, length);
  cost.active_cached_tokens = std::min(active * block_size_, length);
  cost.new_tokens = length - cost.cached_tokens;
  return cost;
}

}  // namespace kvtier::g1::detail
