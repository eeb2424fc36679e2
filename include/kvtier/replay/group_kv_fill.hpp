#pragma once
// One attention group's pages filled with K/V in the group's page format, as
// the replay's byte checks and its attention check read them: every slot of a
// page holds values synthesized from the page's pattern identity and the slot
// (so a page two requests share by a prefix hit holds the same bytes), written
// through the runtime's group kernel (the CUDA kernel, or its CPU reference),
// compared byte for byte with the CPU reference's page, and decoded into the
// values attention must see.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/model_geometry.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/kernels/group_pages.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::replay {

/// The format the replay checks a group's pages in: the group's own when its
/// layers fit the pool's pages in memory (`memory_page_bytes`), else one layer
/// of one small head (16 wide; an MLA latent of 32 + 16, 128 + 16 for
/// fp8_ds_mla's tiles) in the group's quantization when that fits; none for a
/// Mamba state or when nothing fits.
std::optional<kernels::GroupPages> check_pages(const ResolvedGroup& group, std::uint64_t memory_page_bytes,
                                               std::uint32_t capacity);
/// The fewest bytes a page in memory needs for check_pages to give `group`
/// a K/V format (its small form): 0 for a Mamba state.
std::uint64_t smallest_check_page_bytes(const ResolvedGroup& group);

class GroupKvFill {
 public:
  GroupKvFill(memory::KvPool& pool, kernels::GroupPages pages);

  /// Writes slots [first_slot, end_slot) (default: every slot) of pages[i]
  /// from identities[i], every layer, and waits.
  void fill(std::span<const PageId> pages, std::span<const std::uint64_t> identities, std::uint32_t first_slot = 0,
            std::uint32_t end_slot = UINT32_MAX);
  /// The pages (in input order) whose group bytes differ from the reference's.
  std::vector<PageId> mismatches(std::span<const PageId> pages, std::span<const std::uint64_t> identities);
  /// The reference's bytes of a page of `identity` (one page, every layer).
  std::vector<std::byte> expected_page(std::uint64_t identity) const;

  const kernels::GroupPages& pages() const noexcept { return pages_; }
  /// The layer scales the fill writes with (fp8 per tensor, NVFP4's global scale).
  static kernels::LayerScales scales() noexcept { return {.key = 1.0f / 32, .value = 1.0f / 32}; }

 private:
  /// K and V rows (or the latent and RoPE part) of `slot` in a page of `identity`.
  void synthesize(std::uint64_t identity, std::uint32_t slot, std::uint32_t layer, std::span<float> first,
                  std::span<float> second) const;
  std::size_t first_width() const noexcept;
  std::size_t second_width() const noexcept;

  memory::KvPool& pool_;
  kernels::GroupPages pages_;
  memory::Stream stream_;
  memory::PinnedBuffer first_, second_, slots_;  // staging, grown as needed
};

}  // namespace kvtier::replay
