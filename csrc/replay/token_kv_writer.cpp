#include "kvtier/replay/token_kv_writer.hpp"

#include <algorithm>
#include <cstring>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"

namespace kvtier::replay {
namespace {

constexpr std::size_t kMaxStagingBytes = std::size_t{32} << 20;

float* floats(memory::PinnedBuffer& buffer) { return static_cast<float*>(buffer.data()); }

}  // namespace

std::uint64_t token_kv_identity(std::uint64_t parent_block_hash, std::span<const TokenId> block_tokens_through) {
  std::uint64_t identity = page_pattern_word(parent_block_hash, 0x6B76);
  for (const TokenId token : block_tokens_through) identity = page_pattern_word(identity, token);
  return identity;
}

void synthesize_token_kv(std::uint64_t identity, std::uint32_t layer, std::span<float> key, std::span<float> value) {
  // 16 four-bit values per 64-bit word of the page pattern's mixer.
  const auto fill = [&](std::span<float> out, std::uint64_t part) {
    const std::uint64_t seed = identity ^ (std::uint64_t{layer} << 1 | part) * 0xA24BAED4963EE407ULL;
    std::uint64_t word = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i % 16 == 0) word = page_pattern_word(seed, i / 16);
      out[i] = static_cast<float>(static_cast<int>((word >> (4 * (i % 16))) & 15U) - 8);
    }
  };
  fill(key, 0);
  fill(value, 1);
}

TokenKvWriter::TokenKvWriter(memory::KvPool& pool, std::size_t max_staged_tokens)
    : pool_(pool),
      row_(std::size_t{pool.layout().geometry().kv_heads} * pool.layout().geometry().head_dim),
      capacity_(std::max<std::size_t>(
          1, std::min(max_staged_tokens,
                      kMaxStagingBytes / (2 * sizeof(float) * row_ * pool.layout().geometry().layers)))),
      token_bytes_(pool.layout().page_bytes() / pool.layout().geometry().tokens_per_block),
      stream_(pool.runtime().create_stream()),
      keys_(pool.runtime().allocate_pinned(capacity_ * pool.layout().geometry().layers * row_ * sizeof(float))),
      values_(pool.runtime().allocate_pinned(capacity_ * pool.layout().geometry().layers * row_ * sizeof(float))),
      slots_(pool.runtime().allocate_pinned(capacity_ * sizeof(std::int64_t))),
      one_page_(pool.layout().geometry(), pool.layout().layout(), 1),
      expected_(pool.layout().page_bytes()),
      scratch_keys_(row_ * pool.layout().geometry().tokens_per_block),
      scratch_values_(scratch_keys_.size()),
      scratch_slots_(pool.layout().geometry().tokens_per_block) {
  identities_.reserve(capacity_);
  for (std::size_t t = 0; t < scratch_slots_.size(); ++t) scratch_slots_[t] = static_cast<std::int64_t>(t);
}

void TokenKvWriter::stage(PageId page, std::uint32_t offset, std::uint64_t identity) {
  const std::uint32_t block_size = pool_.layout().geometry().tokens_per_block;
  KVTIER_EXPECTS(
      page.value() < pool_.capacity() && offset < block_size,
      "write_kv: slot " + std::to_string(offset) + " of page " + std::to_string(page.value()) + " is outside the pool");
  if (staged_ == capacity_) flush();
  static_cast<std::int64_t*>(slots_.data())[staged_] = std::int64_t{page.value()} * block_size + offset;
  identities_.push_back(identity);
  ++staged_;
}

void TokenKvWriter::flush() {
  if (staged_ == 0) return;
  const std::uint32_t layers = pool_.layout().geometry().layers;
  for (std::uint32_t layer = 0; layer < layers; ++layer) {
    float* keys = floats(keys_) + std::size_t{layer} * capacity_ * row_;
    float* values = floats(values_) + std::size_t{layer} * capacity_ * row_;
    for (std::size_t t = 0; t < staged_; ++t) {
      synthesize_token_kv(identities_[t], layer, std::span(keys + t * row_, row_), std::span(values + t * row_, row_));
    }
    stream_.write_kv_async(memory::KvWrite{.slab = pool_.slab(),
                                           .layout = &pool_.layout(),
                                           .layer = layer,
                                           .key = keys,
                                           .value = values,
                                           .tokens = static_cast<std::uint32_t>(staged_),
                                           .slots = static_cast<const std::int64_t*>(slots_.data())});
  }
  const std::size_t written = staged_;
  staged_ = 0;  // the staging is free again whether or not the writes ran
  identities_.clear();
  stream_.synchronize();
  tokens_written_ += written;
}

std::vector<PageId> TokenKvWriter::find_mismatches(std::span<const PageId> pages,
                                                   std::span<const std::uint64_t> identities) {
  const std::uint32_t block_size = pool_.layout().geometry().tokens_per_block;
  KVTIER_EXPECTS(identities.size() == pages.size() * block_size,
                 "find_mismatches: " + std::to_string(pages.size()) + " pages need " +
                     std::to_string(pages.size() * block_size) + " token identities, not " +
                     std::to_string(identities.size()));
  flush();
  std::vector<PageId> bad;
  pool_.read_pages(pages, [&](std::size_t i, std::span<const std::byte> bytes) {
    for (std::uint32_t layer = 0; layer < one_page_.geometry().layers; ++layer) {
      for (std::uint32_t t = 0; t < block_size; ++t) {
        synthesize_token_kv(identities[i * block_size + t], layer, std::span(scratch_keys_).subspan(t * row_, row_),
                            std::span(scratch_values_).subspan(t * row_, row_));
      }
      kernels::reference::write_kv(expected_.data(), one_page_, layer, scratch_keys_.data(), scratch_values_.data(),
                                   block_size, scratch_slots_.data());
    }
    if (std::memcmp(expected_.data(), bytes.data(), bytes.size()) != 0) bad.push_back(pages[i]);
  });
  return bad;
}

}  // namespace kvtier::replay
