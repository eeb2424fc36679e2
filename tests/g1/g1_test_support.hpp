#pragma once
// Signal builders shared by the G1 tests: a Use of full blocks with injected
// hashes, local hash h+100 and root PLHs, as the spec's examples write them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::g1::testing {

inline UseSignal use_full(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent = std::nullopt) {
  UseSignal use;
  for (std::uint64_t hash : hashes) {
    use.blocks.push_back(UniqueBlock::full(SequenceHash(hash)));
    use.local_hashes.emplace_back(hash + 100);
    use.plhs.emplace_back(SequenceHash(hash), std::nullopt, 0);
  }
  if (parent) use.parent = UniqueBlock::full(SequenceHash(*parent));
  return use;
}

inline DerefSignal deref_full(std::vector<std::uint64_t> hashes_leaf_first) {
  DerefSignal deref;
  for (std::uint64_t hash : hashes_leaf_first) deref.blocks.push_back(UniqueBlock::full(SequenceHash(hash)));
  return deref;
}

inline std::vector<TokenId> token_range(TokenId first, TokenId end) {
  std::vector<TokenId> tokens(end - first);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

inline KvStored stored(std::optional<std::uint64_t> parent,
                       std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks) {
  KvStored s;
  if (parent) s.parent = SequenceHash(*parent);
  for (auto [hash, local] : blocks) s.blocks.push_back({SequenceHash(hash), LocalBlockHash(local)});
  return s;
}

inline KvRemoved removed(std::vector<std::uint64_t> hashes) {
  KvRemoved r;
  for (std::uint64_t hash : hashes) r.hashes.emplace_back(hash);
  return r;
}

struct ManagerWithSink {
  explicit ManagerWithSink(G1ManagerConfig config)
      : sink(std::make_shared<RecordingEventSink>()), manager(config, {sink}) {}
  std::vector<std::variant<KvStored, KvRemoved>> data() const {
    std::vector<std::variant<KvStored, KvRemoved>> out;
    for (const KvEvent& event : sink->events()) out.push_back(event.data);
    return out;
  }
  std::shared_ptr<RecordingEventSink> sink;
  G1Manager manager;
};

/// The pattern identity of the block a page backs (tests write it into the page).
inline std::uint64_t block_identity(const UniqueBlock& b) {
  return b.is_full() ? b.hash().value() : b.uuid().high() ^ b.uuid().low();
}

/// Counts a model predicts equal the manager's metrics.
/// The backend's own audit passes, too.
template <class Model>
void expect_same_counts(const G1Manager& manager, const Model& model) {
  ASSERT_NO_THROW(manager.audit());
  const G1Metrics metrics = manager.metrics();
  ASSERT_EQ(metrics.active_blocks, model.active());
  ASSERT_EQ(metrics.inactive_blocks, model.inactive());
  ASSERT_EQ(metrics.active_block_refs, model.refs());
}

/// Across all owners, every page backs exactly one identity, and no partial page is shared.
inline void expect_each_page_backs_one_identity(const G1Manager& manager) {
  std::map<std::uint32_t, std::uint64_t> identity_of_page;
  for (const OwnerId owner : manager.owners()) {
    const auto blocks = manager.owned_blocks(owner);
    const auto pages = manager.block_table(owner);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const auto [it, inserted] = identity_of_page.emplace(pages[i].value(), block_identity(blocks[i]));
      ASSERT_EQ(it->second, block_identity(blocks[i])) << "page " << pages[i].value() << " backs two identities";
      if (!inserted) {
        ASSERT_TRUE(blocks[i].is_full()) << "a partial page is shared";
      }
    }
  }
}

}  // namespace kvtier::g1::testing
