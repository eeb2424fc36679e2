#pragma once
// The Runtime contract for K/V written through slots and read back by paged
// attention (DESIGN.md rule 3), written once and instantiated per runtime:
// write_kv equals the CPU reference byte for byte, the block-table builder
// packs padded rows, and one decode step of paged attention through the
// tables it built matches the reference; bad calls are refused before
// anything is enqueued. Traits as RuntimeContract's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/block_table_builder.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/runtime.hpp"
#include "memory/runtime_contract.hpp"

namespace kvtier::memory::testing {

/// Fills K and V ([tokens, kv_heads, head_dim], `floats` in all) with small
/// integers, exact in every dtype, varied by `layer`; writes them through
/// `slots` into the reference slab `expected` now and into `pool` on `stream`.
inline void write_small_kv(Stream& stream, KvPool& pool, std::vector<std::byte>& expected, std::uint32_t layer,
                           float* k, float* v, std::size_t floats, const std::int64_t* slots) {
  for (std::size_t i = 0; i < floats; ++i) {
    k[i] = static_cast<float>(static_cast<int>((i * 7 + layer * 3) % 15) - 7);
    v[i] = static_cast<float>(static_cast<int>((i * 5 + layer) % 13) - 6);
  }
  const KvGeometry& g = pool.layout().geometry();
  const auto tokens = static_cast<std::uint32_t>(floats / (std::size_t{g.kv_heads} * g.head_dim));
  kernels::reference::write_kv(expected.data(), pool.layout(), layer, k, v, tokens, slots);
  stream.write_kv_async(KvWrite{.slab = pool.slab(),
                                .layout = &pool.layout(),
                                .layer = layer,
                                .key = k,
                                .value = v,
                                .tokens = tokens,
                                .slots = slots});
}

/// The runtime as RuntimeContract makes it (skipped where it cannot run).
template <class Traits>
class KvWriteContract : public RuntimeContract<Traits> {};

TYPED_TEST_SUITE_P(KvWriteContract);

TYPED_TEST_P(KvWriteContract, WriteKvThroughSlotsMatchesTheReference) {
  for (const KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp8, KvDtype::Fp32}) {
    for (const PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
      const KvGeometry geometry{.layers = 3, .kv_heads = 2, .head_dim = 16, .dtype = dtype, .tokens_per_block = 4};
      const KvLayout layout(geometry, kind, 8);
      KvPool pool(this->runtime(), layout);
      constexpr std::uint32_t kTokens = 6;
      const std::size_t row = 2 * 16;
      PinnedBuffer key = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
      PinnedBuffer value = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
      PinnedBuffer slots = this->runtime().allocate_pinned(kTokens * sizeof(std::int64_t));
      const std::int64_t slot_list[kTokens] = {5, 30, -1, 6, 0, 31};  // pages 1, 7, padding, 1, 0, 7
      std::memcpy(slots.data(), slot_list, sizeof(slot_list));
      std::vector<std::byte> expected(layout.slab_bytes());
      Stream stream = this->runtime().create_stream();
      for (std::uint32_t layer = 0; layer < geometry.layers; ++layer) {
        auto* k = static_cast<float*>(key.data());
        auto* v = static_cast<float*>(value.data());
        stream.synchronize();  // the previous layer's write read these buffers
        write_small_kv(stream, pool, expected, layer, k, v, kTokens * row, static_cast<std::int64_t*>(slots.data()));
      }
      stream.synchronize();
      const std::vector<PageId> pages{PageId(0), PageId(1), PageId(2), PageId(7)};
      pool.read_pages(pages, [&](std::size_t i, std::span<const std::byte> bytes) {
        std::vector<std::byte> want;
        for (std::uint32_t chunk = 0; chunk < layout.chunks_per_page(); ++chunk) {
          const std::byte* at = expected.data() + layout.chunk_offset(pages[i].value(), chunk);
          want.insert(want.end(), at, at + layout.chunk_bytes());
        }
        EXPECT_TRUE(std::equal(want.begin(), want.end(), bytes.begin(), bytes.end()))
            << "page " << pages[i].value() << " " << page_layout_name(kind) << " dtype " << static_cast<int>(dtype);
      });
    }
  }
}

TYPED_TEST_P(KvWriteContract, WriteKvRefusesABadWriteBeforeEnqueuing) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 2));
  PinnedBuffer floats = this->runtime().allocate_pinned(8 * sizeof(float));
  PinnedBuffer slots = this->runtime().allocate_pinned(sizeof(std::int64_t));
  auto* f = static_cast<float*>(floats.data());
  auto* s = static_cast<std::int64_t*>(slots.data());
  Stream stream = this->runtime().create_stream();
  KvWrite write{
      .slab = pool.slab(), .layout = &pool.layout(), .layer = 2, .key = f, .value = f, .tokens = 1, .slots = s};
  EXPECT_THROW(stream.write_kv_async(write), ContractError);  // layer outside the layout
  write.layer = 0;
  write.key = nullptr;
  EXPECT_THROW(stream.write_kv_async(write), ContractError);
  write.key = f;
  write.tokens = 0;
  stream.write_kv_async(write);  // nothing to write is not an error
  stream.synchronize();
}

TYPED_TEST_P(KvWriteContract, BlockTableBuilderPacksPaddedRowsWithOneCopyPerStep) {
  BlockTableBuilder builder(this->runtime(), 4, 3);
  Stream stream = this->runtime().create_stream();
  PinnedBuffer readback = this->runtime().allocate_pinned(4 * 3 * sizeof(std::int32_t));
  PinnedBuffer lengths = this->runtime().allocate_pinned(4 * sizeof(std::int32_t));
  const std::vector<PageId> first{PageId(7), PageId(2)};
  const std::vector<PageId> second{PageId(9)};
  const std::vector<PageId> third{PageId(1), PageId(4), PageId(5)};
  for (int step = 0; step < 4; ++step) {  // reuses both staging buffers
    const std::vector<std::span<const PageId>> rows = step % 2 == 1
                                                          ? std::vector<std::span<const PageId>>{first, second}
                                                          : std::vector<std::span<const PageId>>{first, second, third};
    const std::vector<std::int32_t> seq_lens{5 + step, 3, 9};
    const DeviceBlockTables built = builder.build(rows, stream, std::span(seq_lens).first(rows.size()));
    ASSERT_EQ(built.rows, rows.size());
    ASSERT_EQ(built.columns, step % 2 == 1 ? 2U : 3U);  // as wide as the longest row
    stream.copy_async({built.tables, readback.data(), built.rows * built.columns * sizeof(std::int32_t)});
    stream.copy_async({built.seq_lens, lengths.data(), built.rows * sizeof(std::int32_t)});
    stream.synchronize();
    const auto* got = static_cast<const std::int32_t*>(readback.data());
    if (step % 2 == 1) {
      EXPECT_EQ(std::vector<std::int32_t>(got, got + 4), (std::vector<std::int32_t>{7, 2, 9, -1}));
    } else {
      EXPECT_EQ(std::vector<std::int32_t>(got, got + 9), (std::vector<std::int32_t>{7, 2, -1, 9, -1, -1, 1, 4, 5}));
    }
    const auto* lens = static_cast<const std::int32_t*>(lengths.data());
    EXPECT_EQ(std::vector<std::int32_t>(lens, lens + rows.size()),
              std::vector(seq_lens.begin(), seq_lens.begin() + static_cast<std::ptrdiff_t>(rows.size())));
  }
  // A fixed width, and no lengths.
  const DeviceBlockTables fixed = builder.build(std::vector<std::span<const PageId>>{second}, stream, {}, 3);
  EXPECT_EQ(fixed.columns, 3U);
  EXPECT_EQ(fixed.seq_lens, nullptr);
  stream.copy_async({fixed.tables, readback.data(), 3 * sizeof(std::int32_t)});
  stream.synchronize();
  const auto* got = static_cast<const std::int32_t*>(readback.data());
  EXPECT_EQ(std::vector<std::int32_t>(got, got + 3), (std::vector<std::int32_t>{9, -1, -1}));

  const std::vector<PageId> too_long{PageId(1), PageId(2), PageId(3), PageId(4)};
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{too_long}, stream), ContractError);
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{third}, stream, {}, 2), ContractError);
  const std::vector<std::span<const PageId>> too_many(5, std::span<const PageId>(first));
  EXPECT_THROW(builder.build(too_many, stream), ContractError);
  const std::vector<std::int32_t> one_length{4};
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{first, second}, stream, one_length), ContractError);
}

/// K/V written through slots into scattered pages, then one decode step of
/// paged attention on the same stream through tables the builder made: the
/// result is the CPU reference's over the same bytes.
TYPED_TEST_P(KvWriteContract, PagedAttentionThroughBuiltTablesMatchesTheReference) {
  for (const PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    const KvGeometry geometry{
        .layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 4};
    const KvLayout layout(geometry, kind, 8);
    KvPool pool(this->runtime(), layout);
    Stream stream = this->runtime().create_stream();
    const std::size_t row = std::size_t{geometry.kv_heads} * geometry.head_dim;
    constexpr std::uint32_t kTokens = 32;  // every slot of the pool
    PinnedBuffer key = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
    PinnedBuffer value = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
    PinnedBuffer slots = this->runtime().allocate_pinned(kTokens * sizeof(std::int64_t));
    auto* k = static_cast<float*>(key.data());
    auto* v = static_cast<float*>(value.data());
    auto* slot = static_cast<std::int64_t*>(slots.data());
    for (std::uint32_t t = 0; t < kTokens; ++t) slot[t] = t;
    std::vector<std::byte> host_slab(layout.slab_bytes());
    const std::uint32_t layer = 1;
    write_small_kv(stream, pool, host_slab, layer, k, v, kTokens * row, slot);

    // Three sequences over scattered pages (a partial last block, an empty one).
    const std::vector<PageId> a{PageId(5), PageId(1), PageId(6)};
    const std::vector<PageId> b{PageId(2)};
    const std::vector<PageId> c{};
    const std::vector<std::span<const PageId>> tables{a, b, c};
    const std::vector<std::int32_t> seq_lens{10, 4, 0};
    constexpr std::uint32_t kSeqs = 3;
    constexpr std::uint32_t kQueryHeads = 4;  // GQA: two query heads per KV head
    const std::size_t floats = std::size_t{kSeqs} * kQueryHeads * geometry.head_dim;
    PinnedBuffer query_host = this->runtime().allocate_pinned(floats * sizeof(float));
    PinnedBuffer out_host = this->runtime().allocate_pinned(floats * sizeof(float));
    auto* q = static_cast<float*>(query_host.data());
    for (std::size_t i = 0; i < floats; ++i) q[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 8.0f;
    DeviceBuffer query = this->runtime().allocate_device(floats * sizeof(float));
    DeviceBuffer out = this->runtime().allocate_device(floats * sizeof(float));
    stream.copy_async({q, query.data(), floats * sizeof(float)});
    BlockTableBuilder builder(this->runtime(), 4, 8);
    const DeviceBlockTables built = builder.build(tables, stream, seq_lens);
    const AttentionDecode step{.slab = pool.slab(),
                               .layout = &pool.layout(),
                               .args = {.query = static_cast<const float*>(query.data()),
                                        .block_tables = built.tables,
                                        .seq_lens = built.seq_lens,
                                        .out = static_cast<float*>(out.data()),
                                        .seqs = built.rows,
                                        .q_heads = kQueryHeads,
                                        .max_blocks = built.columns,
                                        .layer = layer,
                                        .scale = 0.25f}};
    stream.paged_attention_async(step);
    stream.copy_async({out.data(), out_host.data(), floats * sizeof(float)});
    stream.synchronize();

    std::vector<std::int32_t> host_tables(std::size_t{kSeqs} * built.columns, -1);
    for (std::size_t s = 0; s < kSeqs; ++s) {
      for (std::size_t i = 0; i < tables[s].size(); ++i) {
        host_tables[s * built.columns + i] = static_cast<std::int32_t>(tables[s][i].value());
      }
    }
    std::vector<float> expected(floats, -1.0f);
    kernels::reference::paged_attention_decode(host_slab.data(), layout,
                                               {.query = q,
                                                .block_tables = host_tables.data(),
                                                .seq_lens = seq_lens.data(),
                                                .out = expected.data(),
                                                .seqs = kSeqs,
                                                .q_heads = kQueryHeads,
                                                .max_blocks = built.columns,
                                                .layer = layer,
                                                .scale = 0.25f});
    const auto* got = static_cast<const float*>(out_host.data());
    for (std::size_t i = 0; i < floats; ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4f * (1.0f + std::abs(expected[i])))
          << "output " << i << " " << page_layout_name(kind);
    }
    EXPECT_EQ(got[floats - 1], 0.0f);  // the empty sequence attends to nothing: zeros
  }
}

TYPED_TEST_P(KvWriteContract, PagedAttentionRefusesABadStepBeforeEnqueuing) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 2, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 2));
  DeviceBuffer buffer = this->runtime().allocate_device(1024);
  auto* f = static_cast<float*>(buffer.data());
  auto* i = static_cast<const std::int32_t*>(buffer.data());
  Stream stream = this->runtime().create_stream();
  AttentionDecode step{.slab = pool.slab(),
                       .layout = &pool.layout(),
                       .args = {.query = f,
                                .block_tables = i,
                                .seq_lens = i,
                                .out = f,
                                .seqs = 1,
                                .q_heads = 3,
                                .max_blocks = 1,
                                .layer = 0}};
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);  // 3 query heads over 2 KV heads
  step.args.q_heads = 2;
  step.args.layer = 2;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);  // a layer outside the layout
  step.args.layer = 0;
  step.args.max_blocks = 0;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);
  step.args.max_blocks = 1;
  step.args.out = nullptr;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);
  step.args.seqs = 0;
  stream.paged_attention_async(step);  // no sequences is not an error
  stream.synchronize();
}

REGISTER_TYPED_TEST_SUITE_P(KvWriteContract, WriteKvThroughSlotsMatchesTheReference,
                            WriteKvRefusesABadWriteBeforeEnqueuing, BlockTableBuilderPacksPaddedRowsWithOneCopyPerStep,
                            PagedAttentionThroughBuiltTablesMatchesTheReference,
                            PagedAttentionRefusesABadStepBeforeEnqueuing);

}  // namespace kvtier::memory::testing
