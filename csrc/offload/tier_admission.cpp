#include "kvtier/offload/tier_admission.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::offload {

const char* tier_admission_name(TierAdmission admission) noexcept {
  return admission == TierAdmission::SecondOffer ? "second_offer" : "all";
}

TierAdmission parse_tier_admission(std::string_view name) {
  for (const TierAdmission a : {TierAdmission::All, TierAdmission::SecondOffer}) {
    if (name == tier_admission_name(a)) return a;
  }
  throw ConfigError("unknown tier admission '" + std::string(name) + "' (expected all or second_offer)");
}

AdmissionFilter::AdmissionFilter(TierAdmission admission, std::size_t history)
    : admission_(admission), history_(std::max<std::size_t>(history, 1)) {}

bool AdmissionFilter::remember(const PositionalLineageHash& plh) {
  const bool seen = recent_.contains(plh) || older_.erase(plh) > 0;
  if (recent_.size() >= history_ && !recent_.contains(plh)) {  // the older generation is forgotten whole
    older_ = std::move(recent_);
    recent_.clear();
  }
  recent_.insert(plh);
  return seen;
}

bool AdmissionFilter::admit(const PositionalLineageHash& plh) {
  if (admission_ == TierAdmission::All) return true;
  const bool seen = remember(plh);
  if (!seen) ++declined_;
  return seen;
}

void AdmissionFilter::note(const PositionalLineageHash& plh) {
  if (admission_ != TierAdmission::All) (void)remember(plh);
}

std::size_t AdmissionFilter::memory_bytes() const noexcept {
  constexpr std::size_t kNode = sizeof(PositionalLineageHash) + 2 * sizeof(void*);  // node + bucket share, about
  return (recent_.size() + older_.size()) * kNode;
}

}  // namespace kvtier::offload
