#pragma once
// What a router learns of one tier from the KV events: the hashes its Stored
// events added and its Removed events did not take away, checking that they
// alternate per hash (never stored twice, never removed when not held).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <variant>
#include <vector>

#include "kvtier/core/kv_event.hpp"

namespace kvtier::testing {

inline std::set<std::uint64_t> held_by_tier(const std::vector<KvEvent>& events, StorageTier tier) {
  std::set<std::uint64_t> held;
  for (const KvEvent& event : events) {
    if (event.tier != tier) continue;
    if (const auto* stored = std::get_if<KvStored>(&event.data)) {
      for (const auto& block : stored->blocks) EXPECT_TRUE(held.insert(block.hash.value()).second);
    } else {
      for (const SequenceHash hash : std::get<KvRemoved>(event.data).hashes) EXPECT_EQ(held.erase(hash.value()), 1U);
    }
  }
  return held;
}

}  // namespace kvtier::testing
