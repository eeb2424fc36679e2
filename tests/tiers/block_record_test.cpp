// The record format the tiers below G2 store blocks in: a round trip keeps
// every field, and every way a stored record can go bad is told apart.
#include "kvtier/tiers/block_record.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"
#include "support/record_forgery.hpp"

#include <cstring>
#include <numeric>
#include <vector>

namespace kvtier::tiers {
namespace {

KvLayout layout(PageLayout kind = PageLayout::PageMajor, std::uint32_t block_size = 16) {
  return KvLayout(
      KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 8, .dtype = KvDtype::Bf16, .tokens_per_block = block_size},
      kind, 4);
}

g1::TieredBlock block_with_tokens(std::size_t tokens) {
  std::vector<TokenId> ids(tokens);
  std::iota(ids.begin(), ids.end(), TokenId{100});
  return g1::TieredBlock{.plh = PositionalLineageHash::from_raw(0x1234, 0x5678),
                         .hash = SequenceHash(0xABCDEF),
                         .parent = SequenceHash(0x42),
                         .local = LocalBlockHash(7),
                         .token_ids = std::move(ids)};
}

struct Record {
  std::vector<std::byte> bytes;
  std::size_t header = 0;
  std::span<std::byte> payload() { return std::span(bytes).subspan(header); }
};

Record make_record(const g1::TieredBlock& block, std::uint64_t fingerprint, std::size_t payload_bytes,
                   const TierKey* key = nullptr) {
  Record r;
  r.header = record_header_bytes(block.token_ids ? block.token_ids->size() : 0);
  r.bytes.resize(r.header + payload_bytes);
  for (std::size_t i = 0; i < payload_bytes; ++i) r.bytes[r.header + i] = static_cast<std::byte>(i * 31 + 7);
  write_record_header(std::span(r.bytes).first(r.header), block, fingerprint, 9, r.payload(), key);
  return r;
}

TierKey key_of(char fill) {
  const std::vector<std::byte> secret(32, static_cast<std::byte>(fill));
  return TierKey::from_secret(secret);
}

RecordCheck check(Record& r, std::uint64_t fp, const TierKey* key) {
  BlockRecordMeta meta;
  const RecordCheck header = read_record_header(r.bytes, fp, meta, key);
  if (header != RecordCheck::Ok) return header;
  return check_payload(meta, std::span(r.bytes).first(r.header), r.payload(), key);
}

TEST(BlockRecord, RoundTripKeepsEveryField) {
  const std::uint64_t fp = layout_fingerprint(layout());
  const g1::TieredBlock block = block_with_tokens(16);
  Record r = make_record(block, fp, 8192);
  EXPECT_EQ(r.header % kRecordAlignment, 0U);
  EXPECT_EQ(stored_header_bytes(r.bytes), r.header);
  BlockRecordMeta meta;
  ASSERT_EQ(read_record_header(r.bytes, fp, meta), RecordCheck::Ok);
  EXPECT_EQ(meta.block.plh, block.plh);
  EXPECT_EQ(meta.block.hash, block.hash);
  EXPECT_EQ(meta.block.parent, block.parent);
  EXPECT_EQ(meta.block.local, block.local);
  EXPECT_EQ(meta.block.token_ids, block.token_ids);
  EXPECT_EQ(meta.generation, 9U);
  EXPECT_EQ(meta.payload_bytes, 8192U);
  EXPECT_EQ(meta.key_id, 0U);
  EXPECT_EQ(check_payload(meta, std::span(r.bytes).first(r.header), r.payload()), RecordCheck::Ok);
}

TEST(BlockRecord, ABlockWithoutParentOrTokenIdsStaysWithout) {
  const std::uint64_t fp = layout_fingerprint(layout());
  g1::TieredBlock block = block_with_tokens(0);
  block.parent.reset();
  block.token_ids.reset();
  Record r = make_record(block, fp, 4096);
  EXPECT_EQ(r.header, kRecordAlignment);
  BlockRecordMeta meta;
  ASSERT_EQ(read_record_header(r.bytes, fp, meta), RecordCheck::Ok);
  EXPECT_FALSE(meta.block.parent.has_value());
  EXPECT_FALSE(meta.block.token_ids.has_value());
}

TEST(BlockRecord, ManyTokenIdsTakeMoreAlignedHeaderBytes) {
  EXPECT_EQ(record_header_bytes(16), kRecordAlignment);
  EXPECT_EQ(record_header_bytes(2048), 3 * kRecordAlignment);  // 144 + 8192 bytes
  const std::uint64_t fp = layout_fingerprint(layout(PageLayout::PageMajor, 2048));
  Record r = make_record(block_with_tokens(2048), fp, 100);
  BlockRecordMeta meta;
  ASSERT_EQ(read_record_header(r.bytes, fp, meta), RecordCheck::Ok);
  EXPECT_EQ(meta.block.token_ids->size(), 2048U);
  EXPECT_EQ(meta.block.token_ids->back(), TokenId{100 + 2047});
}

TEST(BlockRecord, AFlippedPayloadByteIsCaught) {
  const std::uint64_t fp = layout_fingerprint(layout());
  Record r = make_record(block_with_tokens(16), fp, 8192);
  BlockRecordMeta meta;
  ASSERT_EQ(read_record_header(r.bytes, fp, meta), RecordCheck::Ok);
  r.payload()[5000] ^= std::byte{0x10};
  const auto header = std::span(r.bytes).first(r.header);
  EXPECT_EQ(check_payload(meta, header, r.payload()), RecordCheck::PayloadCorrupt);
  EXPECT_EQ(check_payload(meta, header, r.payload().first(100)), RecordCheck::Truncated);
}

TEST(BlockRecord, EveryFlippedHeaderByteIsCaught) {
  const std::uint64_t fp = layout_fingerprint(layout());
  const Record good = make_record(block_with_tokens(16), fp, 64);
  const std::size_t used = 144 + 16 * sizeof(TokenId);
  for (std::size_t at = 0; at < used; ++at) {
    Record r = good;
    r.bytes[at] ^= std::byte{0x01};
    BlockRecordMeta meta;
    const RecordCheck check = read_record_header(r.bytes, fp, meta);
    EXPECT_NE(check, RecordCheck::Ok) << "byte " << at;
    EXPECT_NE(check, RecordCheck::OtherLayout) << "byte " << at;  // a torn fingerprint is corruption, checked first
  }
}

TEST(BlockRecord, AnotherLayoutIsRefusedByItsFingerprint) {
  const std::uint64_t page_major = layout_fingerprint(layout(PageLayout::PageMajor));
  const std::uint64_t layer_major = layout_fingerprint(layout(PageLayout::LayerMajor));
  const std::uint64_t other_blocks = layout_fingerprint(layout(PageLayout::PageMajor, 32));
  EXPECT_NE(page_major, layer_major);
  EXPECT_NE(page_major, other_blocks);
  // The capacity is not part of it: a tier outlives a resize of G1.
  EXPECT_EQ(page_major, layout_fingerprint(KvLayout(layout().geometry(), PageLayout::PageMajor, 4096)));
  Record r = make_record(block_with_tokens(16), page_major, 64);
  BlockRecordMeta meta;
  EXPECT_EQ(read_record_header(r.bytes, layer_major, meta), RecordCheck::OtherLayout);
}

TEST(BlockRecord, EmptyTruncatedAndForeignBytesAreNotServed) {
  const std::uint64_t fp = layout_fingerprint(layout());
  BlockRecordMeta meta;
  std::vector<std::byte> zeros(kRecordAlignment, std::byte{0});
  EXPECT_EQ(read_record_header(zeros, fp, meta), RecordCheck::NotARecord);
  EXPECT_EQ(stored_header_bytes(zeros), 0U);
  EXPECT_EQ(read_record_header(std::span<const std::byte>(), fp, meta), RecordCheck::NotARecord);
  const Record r = make_record(block_with_tokens(16), fp, 64);
  EXPECT_EQ(read_record_header(std::span(r.bytes).first(50), fp, meta), RecordCheck::Truncated);
  EXPECT_EQ(read_record_header(std::span(r.bytes).first(120), fp, meta), RecordCheck::Truncated);
}

// Issue 31, C2: the XXH3 checksums are not a MAC. Without a key a forged
// record with recomputed checksums reads as good (what the docs warn of);
// with one it is refused, and a record of no key or another key too.
TEST(BlockRecord, AForgedPayloadWithRecomputedChecksumsPassesXxh3ButNotTheMac) {
  const std::uint64_t fp = layout_fingerprint(layout());
  const TierKey key = key_of('k');
  Record unkeyed = make_record(block_with_tokens(16), fp, 8192);
  testing::forge_record(unkeyed.bytes, unkeyed.header);
  EXPECT_EQ(check(unkeyed, fp, nullptr), RecordCheck::Ok) << "the forgery this test mimics no longer works";

  Record keyed = make_record(block_with_tokens(16), fp, 8192, &key);
  EXPECT_EQ(check(keyed, fp, &key), RecordCheck::Ok);
  Record forged = keyed;
  testing::forge_record(forged.bytes, forged.header);
  EXPECT_EQ(check(forged, fp, &key), RecordCheck::Forged);
  // Forged header fields (the token ids) are caught the same way.
  Record tokens = keyed;
  tokens.bytes[144] ^= std::byte{1};
  testing::recompute_checksums(tokens.bytes, tokens.header);
  EXPECT_EQ(check(tokens, fp, &key), RecordCheck::Forged);

  EXPECT_EQ(check(unkeyed, fp, &key), RecordCheck::Unauthenticated);  // no MAC at all
  const TierKey other = key_of('o');
  EXPECT_NE(other.id(), key.id());
  EXPECT_EQ(check(keyed, fp, &other), RecordCheck::Unauthenticated);  // another key's
  EXPECT_EQ(check(keyed, fp, nullptr), RecordCheck::Ok);              // no key given: nothing to authenticate with
}

TEST(BlockRecord, AnotherFormatVersionIsToldApartAndNotRead) {
  const std::uint64_t fp = layout_fingerprint(layout());
  Record r = make_record(block_with_tokens(16), fp, 64);
  const std::uint32_t version = kRecordVersion + 1;
  std::memcpy(r.bytes.data() + 8, &version, sizeof(version));
  BlockRecordMeta meta;
  EXPECT_EQ(read_record_header(r.bytes, fp, meta), RecordCheck::OtherVersion);
}

TEST(TierKey, NeedsEnoughSecretAndNamesItselfByAnId) {
  EXPECT_THROW((void)TierKey::from_secret(std::vector<std::byte>(31)), ConfigError);
  const TierKey a = key_of('a');
  EXPECT_EQ(a.id(), key_of('a').id());
  EXPECT_NE(a.id(), 0U);
  const std::vector<std::byte> text(100, std::byte{3});
  EXPECT_TRUE(same_mac(a.mac(text, {}), a.mac(std::span(text).first(40), std::span(text).subspan(40))));
  EXPECT_FALSE(same_mac(a.mac(text, {}), key_of('b').mac(text, {})));
}

TEST(BlockRecord, AHeaderBufferTooSmallIsAContractError) {
  std::vector<std::byte> small(100);
  EXPECT_THROW(write_record_header(small, block_with_tokens(16), 1, 1, {}), ContractError);
}

}  // namespace
}  // namespace kvtier::tiers
