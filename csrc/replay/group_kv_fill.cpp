#include "kvtier/replay/group_kv_fill.hpp"

#include <algorithm>
#include <cstring>

#include "kvtier/core/expects.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/kernels/reference/write_group_kv.hpp"
#include "kvtier/replay/token_kv_writer.hpp"

namespace kvtier::replay {
namespace {

constexpr std::uint32_t kSmallWidth = 16;

void grow(memory::Runtime& runtime, memory::PinnedBuffer& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer = runtime.allocate_pinned(std::max(bytes, 2 * buffer.size()));
}

}  // namespace

namespace {

/// One layer of one small head (a latent of two) in the group's quantization.
kernels::GroupPages small_form(kernels::GroupPages pages) {
  PageFormat& f = pages.format;
  pages.layers = 1;
  if (f.content == PageContent::KeyValue) {
    f.kv_heads = 1;
    f.head_dim = kSmallWidth;
    f.head_dim_v = kSmallWidth;
  } else {
    // fp8_ds_mla scales tiles of 128; the other latents take two small heads' width.
    f.latent_dim = f.quant == KvQuant::Fp8DsMla ? kDsMlaTile : 2 * kSmallWidth;
    f.rope_dim = std::min(f.rope_dim, kSmallWidth);
  }
  return pages;
}

}  // namespace

std::optional<kernels::GroupPages> check_pages(const ResolvedGroup& group, std::uint64_t memory_page_bytes,
                                               std::uint32_t capacity) {
  if (group.spec.kind == GroupKind::Mamba) return std::nullopt;
  kernels::GroupPages pages{
      .format = group.format(), .layers = group.spec.layers, .page_stride = memory_page_bytes, .capacity = capacity};
  if (pages.group_page_bytes() <= memory_page_bytes) return pages;
  pages = small_form(pages);
  if (pages.group_page_bytes() <= memory_page_bytes) return pages;
  return std::nullopt;
}

std::uint64_t smallest_check_page_bytes(const ResolvedGroup& group) {
  if (group.spec.kind == GroupKind::Mamba) return 0;
  return small_form(kernels::GroupPages{.format = group.format(), .layers = group.spec.layers}).group_page_bytes();
}

GroupKvFill::GroupKvFill(memory::KvPool& pool, kernels::GroupPages pages)
    : pool_(pool), pages_(pages), stream_(pool.runtime().create_stream()) {
  kernels::check_group_pages(pages_);
  KVTIER_EXPECTS(pages_.format.content != PageContent::MambaState, "a Mamba state has no K/V to fill");
  KVTIER_EXPECTS(pages_.page_stride == pool.layout().page_bytes() && pages_.capacity == pool.capacity(),
                 "the group's pages are not the pool's");
}

std::size_t GroupKvFill::first_width() const noexcept {
  const PageFormat& f = pages_.format;
  return f.content == PageContent::MlaLatent ? f.latent_dim : std::size_t{f.kv_heads} * f.head_dim;
}

std::size_t GroupKvFill::second_width() const noexcept {
  const PageFormat& f = pages_.format;
  return f.content == PageContent::MlaLatent ? f.rope_dim : std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Value);
}

void GroupKvFill::synthesize(std::uint64_t identity, std::uint32_t slot, std::uint32_t layer, std::span<float> first,
                             std::span<float> second) const {
  synthesize_token_kv(page_pattern_word(identity, 0x4B560000ULL + slot), layer, first, second);
}

void GroupKvFill::fill(std::span<const PageId> pages, std::span<const std::uint64_t> identities,
                       std::uint32_t first_slot, std::uint32_t end_slot) {
  KVTIER_EXPECTS(pages.size() == identities.size(), "fill: ", pages.size(), " pages but ", identities.size(),
                 " identities");
  end_slot = std::min(end_slot, pages_.format.block_size);
  if (pages.empty() || first_slot >= end_slot) return;
  const std::uint32_t bs = end_slot - first_slot;  // slots written a page
  const std::size_t tokens = pages.size() * bs;
  memory::Runtime& runtime = pool_.runtime();
  grow(runtime, first_, tokens * std::max<std::size_t>(1, first_width()) * sizeof(float));
  grow(runtime, second_, tokens * std::max<std::size_t>(1, second_width()) * sizeof(float));
  grow(runtime, slots_, tokens * sizeof(std::int64_t));
  auto* slots = static_cast<std::int64_t*>(slots_.data());
  for (std::size_t i = 0; i < pages.size(); ++i) {
    KVTIER_EXPECTS(pages[i].value() < pages_.capacity, "fill: page ", pages[i].value(), " is outside the pool");
    for (std::uint32_t s = 0; s < bs; ++s) {
      slots[i * bs + s] = std::int64_t{pages[i].value()} * pages_.format.block_size + first_slot + s;
    }
  }
  auto* first = static_cast<float*>(first_.data());
  auto* second = static_cast<float*>(second_.data());
  for (std::uint32_t layer = 0; layer < pages_.layers; ++layer) {
    for (std::size_t i = 0; i < pages.size(); ++i) {
      for (std::uint32_t s = 0; s < bs; ++s) {
        const std::size_t t = i * bs + s;
        synthesize(identities[i], first_slot + s, layer, std::span<float>(first + t * first_width(), first_width()),
                   std::span<float>(second + t * second_width(), second_width()));
      }
    }
    stream_.write_group_kv_async(memory::GroupKvWrite{.slab = pool_.slab(),
                                                      .pages = pages_,
                                                      .layer = layer,
                                                      .first = first,
                                                      .second = second,
                                                      .tokens = static_cast<std::uint32_t>(tokens),
                                                      .slots = slots,
                                                      .scales = scales()});
    stream_.synchronize();  // the staging buffers are the next layer's
  }
}

std::vector<std::byte> GroupKvFill::expected_page(std::uint64_t identity) const {
  kernels::GroupPages one = pages_;
  one.capacity = 1;
  one.page_stride = pages_.group_page_bytes();
  std::vector<std::byte> page(one.page_stride);
  const std::uint32_t bs = pages_.format.block_size;
  std::vector<float> first(std::size_t{bs} * first_width()), second(std::size_t{bs} * second_width());
  std::vector<std::int64_t> slots(bs);
  for (std::uint32_t s = 0; s < bs; ++s) slots[s] = s;
  for (std::uint32_t layer = 0; layer < pages_.layers; ++layer) {
    for (std::uint32_t s = 0; s < bs; ++s) {
      synthesize(identity, s, layer, std::span<float>(first.data() + s * first_width(), first_width()),
                 std::span<float>(second.data() + s * second_width(), second_width()));
    }
    if (pages_.format.content == PageContent::MlaLatent) {
      kernels::reference::write_mla(page.data(), one, layer, first.data(), second.data(), bs, slots.data(), scales());
    } else {
      kernels::reference::write_group_kv(page.data(), one, layer, first.data(), second.data(), bs, slots.data(),
                                         scales());
    }
  }
  return page;
}

std::vector<PageId> GroupKvFill::mismatches(std::span<const PageId> pages, std::span<const std::uint64_t> identities) {
  KVTIER_EXPECTS(pages.size() == identities.size(), "mismatches: ", pages.size(), " pages but ", identities.size(),
                 " identities");
  std::vector<PageId> bad;
  const std::size_t bytes = pages_.group_page_bytes();
  pool_.read_pages(pages, [&](std::size_t i, std::span<const std::byte> page) {
    const std::vector<std::byte> want = expected_page(identities[i]);
    if (page.size() < bytes || std::memcmp(page.data(), want.data(), bytes) != 0) bad.push_back(pages[i]);
  });
  return bad;
}

}  // namespace kvtier::replay
