// Tier admission (docs/policies.md): everything, or second sight by offers
// with a bounded history; a hit noted above counts as a sighting.
#include "kvtier/offload/tier_admission.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::offload {
namespace {

PositionalLineageHash block(std::uint64_t v) { return PositionalLineageHash(SequenceHash(v), std::nullopt, 0); }

TEST(TierAdmission, AllAdmitsEveryOffer) {
  AdmissionFilter all(TierAdmission::All, 4);
  for (std::uint64_t v = 0; v < 10; ++v) EXPECT_TRUE(all.admit(block(v)));
  EXPECT_EQ(all.declined(), 0U);
}

TEST(TierAdmission, SecondOfferDeclinesTheFirstAndAdmitsTheNext) {
  AdmissionFilter filter(TierAdmission::SecondOffer, 4);
  EXPECT_FALSE(filter.admit(block(1)));
  EXPECT_FALSE(filter.admit(block(2)));
  EXPECT_TRUE(filter.admit(block(1)));
  EXPECT_TRUE(filter.admit(block(1)));  // remembered still: stored again after the tier let it go
  EXPECT_EQ(filter.declined(), 2U);
}

TEST(TierAdmission, AHitNotedAboveAdmitsTheFirstOffer) {
  AdmissionFilter filter(TierAdmission::SecondOffer, 4);
  filter.note(block(7));
  EXPECT_TRUE(filter.admit(block(7)));
  EXPECT_EQ(filter.declined(), 0U);
  AdmissionFilter all(TierAdmission::All, 4);
  all.note(block(7));  // nothing to remember
  EXPECT_EQ(all.memory_bytes(), 0U);
}

TEST(TierAdmission, TheHistoryIsBounded) {
  AdmissionFilter filter(TierAdmission::SecondOffer, 2);  // two generations of two
  EXPECT_FALSE(filter.admit(block(1)));
  for (std::uint64_t v = 100; v < 110; ++v) EXPECT_FALSE(filter.admit(block(v)));
  EXPECT_FALSE(filter.admit(block(1)));   // forgotten: a first offer again
  EXPECT_TRUE(filter.admit(block(109)));  // recent: remembered
  EXPECT_LE(filter.memory_bytes(), 4 * 64U);
}

TEST(TierAdmission, NamesParseAndOthersAreRefused) {
  EXPECT_EQ(parse_tier_admission("all"), TierAdmission::All);
  EXPECT_EQ(parse_tier_admission("second_offer"), TierAdmission::SecondOffer);
  EXPECT_STREQ(tier_admission_name(TierAdmission::SecondOffer), "second_offer");
  EXPECT_THROW(parse_tier_admission("tinylfu"), ConfigError);
}

}  // namespace
}  // namespace kvtier::offload
