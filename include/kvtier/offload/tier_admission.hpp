#pragma once
// What a tier admits of the blocks offered to it (docs/policies.md): G1's
// evictions offered to G2, G2's evictions offered to G3 and G4.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_set>

#include "kvtier/core/lineage_hash.hpp"

namespace kvtier::offload {

enum class TierAdmission : std::uint8_t {
  All,          // every block offered is stored (kvtier's behaviour before issue 35)
  SecondOffer,  // second sight: a block is stored from its second offer on
};
/// "all" or "second_offer".
const char* tier_admission_name(TierAdmission admission) noexcept;
/// ConfigError naming the choices for anything else.
TierAdmission parse_tier_admission(std::string_view name);

/// One tier's admission: with SecondOffer, a block's first offer is declined
/// and remembered in a bounded history (two generations of `history` blocks,
/// the older forgotten whole when the newer fills), and an offer of a block
/// the history holds is admitted (and refreshed): a block that came back
/// into the tier above and was evicted again, or was a hit there (note),
/// has paid back once already.
class AdmissionFilter {
 public:
  AdmissionFilter(TierAdmission admission, std::size_t history);
  /// True: store it. False: declined (counted, remembered).
  bool admit(const PositionalLineageHash& plh);
  /// The block was used again (a hit in the tier above): its first offer is admitted.
  void note(const PositionalLineageHash& plh);
  TierAdmission admission() const noexcept { return admission_; }
  std::uint64_t declined() const noexcept { return declined_; }
  std::size_t memory_bytes() const noexcept;

 private:
  /// Records a sighting; true when the history held it already.
  bool remember(const PositionalLineageHash& plh);

  TierAdmission admission_;
  std::size_t history_;
  std::unordered_set<PositionalLineageHash> recent_;
  std::unordered_set<PositionalLineageHash> older_;
  std::uint64_t declined_ = 0;
};

}  // namespace kvtier::offload
