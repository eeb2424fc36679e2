#pragma once
#include <array>
#include <vector>

#include "g1/eviction/page_list.hpp"
#include "g1/eviction/tiny_lfu.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// Four LRU lists by frequency at insertion time, from 4-bit TinyLFU
/// counters: cold < 3, warm 3–7, hot 8–14, very hot >= 15 (Dynamo's default
/// thresholds). Victims come from the coldest non-empty level, LRU within it.
class MultiLruEvictionPolicy final : public EvictionPolicy {
 public:
  static constexpr std::array<std::uint32_t, 3> kThresholds{3, 8, 15};

  explicit MultiLruEvictionPolicy(std::uint32_t capacity);
  std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const override;
  void insert(PageId page, const PositionalLineageHash& plh) override;
  void remove(PageId page) override;
  bool contains(PageId page) const override { return links_.list[page.value()] != PageLinks::kNoList; }
  std::optional<PageId> evict() override;
  std::size_t size() const override;
  void touch(const PositionalLineageHash& plh) override { frequency_.increment(plh); }
  std::size_t metadata_bytes() const override;

  /// The level a block with this frequency joins (0 = cold .. 3 = very hot).
  static std::uint32_t level_for(std::uint32_t frequency) noexcept;
  std::uint32_t frequency(const PositionalLineageHash& plh) const noexcept { return frequency_.estimate(plh); }

 private:
  PageLinks links_;
  std::array<PageList, 4> levels_;
  TinyLfu frequency_;
};

}  // namespace kvtier::g1
