#pragma once
#include <vector>

#include "g1/eviction/page_list.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// Plain recency of insertion into the inactive pool: the least recently
/// inserted block is the victim; a match removes it, a release re-inserts it
/// as most recent.
class LruEvictionPolicy final : public EvictionPolicy {
 public:
  explicit LruEvictionPolicy(std::uint32_t capacity);
  std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const override;
  void insert(PageId page, const PositionalLineageHash& plh) override;
  void remove(PageId page) override;
  bool contains(PageId page) const override { return list_.contains(page.value()); }
  std::optional<PageId> evict() override;
  std::size_t size() const override { return list_.size(); }
  std::size_t metadata_bytes() const override;

 private:
  PageLinks links_;
  PageList list_;
};

}  // namespace kvtier::g1
