// A restart of the disk tier: the slots' headers say which blocks the file
// holds; empty, torn, foreign and superseded slots are told apart and never
// served.
#include "kvtier/tiers/disk/slot_scan.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::disk {
namespace {

KvLayout layout(std::uint32_t heads = 2) {
  return KvLayout(
      KvGeometry{.layers = 2, .kv_heads = heads, .head_dim = 8, .dtype = KvDtype::Fp16, .tokens_per_block = 16},
      PageLayout::PageMajor, 8);
}

g1::TieredBlock block(std::uint64_t n) {
  return g1::TieredBlock{.plh = PositionalLineageHash::from_raw(n, n * 3),
                         .hash = SequenceHash(n * 1000),
                         .parent = std::nullopt,
                         .local = LocalBlockHash(n),
                         .token_ids = std::vector<TokenId>(16, static_cast<TokenId>(n))};
}

class SlotScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kvtier_slot_scan_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = dir_ / "g3.slots";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// The bytes of a slot holding `b` (written `generation`) for `of` layout.
  std::vector<std::byte> slot_bytes(const g1::TieredBlock& b, std::uint64_t generation, const KvLayout& of) const {
    const SlotGeometry g = SlotGeometry::of(of);
    std::vector<std::byte> bytes(g.slot_bytes, std::byte{0});
    const auto payload = std::span(bytes).subspan(g.header_bytes, g.payload_bytes);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i + generation);
    write_record_header(std::span(bytes).first(g.header_bytes), b, layout_fingerprint(of), generation, payload);
    return bytes;
  }
  void write_file(const std::vector<std::vector<std::byte>>& slots, std::size_t cut = 0) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    const std::vector<char> file_header(kTierFileHeaderBytes, 0);  // the scan starts past it
    out.write(file_header.data(), static_cast<std::streamsize>(file_header.size()));
    for (const auto& slot : slots)
      out.write(reinterpret_cast<const char*>(slot.data()), static_cast<std::streamsize>(slot.size()));
    out.close();
    if (cut > 0) std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - cut);
  }

  std::filesystem::path dir_;
  std::filesystem::path path_;
};

TEST_F(SlotScanTest, EverySlotIsToldApartAndTheNewestCopyOfABlockWins) {
  const KvLayout ours = layout();
  const SlotGeometry g = SlotGeometry::of(ours);
  EXPECT_EQ(g.slot_bytes % kRecordAlignment, 0U);
  std::vector<std::vector<std::byte>> slots;
  slots.push_back(slot_bytes(block(1), 1, ours));         // 0: A, generation 1
  slots.push_back(std::vector<std::byte>(g.slot_bytes));  // 1: never written
  slots.push_back(slot_bytes(block(2), 2, ours));         // 2: B
  slots.push_back(slot_bytes(block(3), 3, ours));         // 3: C, its header then torn
  slots.back()[60] ^= std::byte{0xFF};
  slots.push_back(slot_bytes(block(1), 5, ours));     // 4: A again, generation 5
  auto foreign = slot_bytes(block(4), 4, layout(4));  // 5: another layout's record
  foreign.resize(g.slot_bytes);
  slots.push_back(foreign);
  write_file(slots);
  DirectFile file(path_);
  IoQueue queue(3);
  const SlotScan scan = scan_slots(file, g, 8, layout_fingerprint(ours), queue);  // slots 6 and 7: past the end
  ASSERT_EQ(scan.resident.size(), 2U);
  EXPECT_EQ(scan.resident[0].slot, 2U);
  EXPECT_EQ(scan.resident[0].meta.block.hash, block(2).hash);
  EXPECT_EQ(scan.resident[1].slot, 4U);
  EXPECT_EQ(scan.resident[1].meta.generation, 5U);
  EXPECT_EQ(scan.resident[1].meta.block.token_ids, block(1).token_ids);
  EXPECT_EQ(scan.empty, 3U);
  EXPECT_EQ(scan.corrupt, 1U);
  EXPECT_EQ(scan.other_layout, 1U);
  EXPECT_EQ(scan.superseded, 1U);
  EXPECT_EQ(scan.newest_generation, 5U);
  EXPECT_EQ(queue.in_flight(), 0U);
}

TEST_F(SlotScanTest, AHeaderCutShortByTheEndOfTheFileIsNotServed) {
  const KvLayout ours = layout();
  const SlotGeometry g = SlotGeometry::of(ours);
  std::vector<std::vector<std::byte>> slots{slot_bytes(block(1), 1, ours), slot_bytes(block(2), 2, ours)};
  slots[1].resize(100);  // a crash while the second slot's first bytes were being written
  write_file(slots);
  DirectFile file(path_);
  IoQueue queue(2);
  const SlotScan scan = scan_slots(file, g, 2, layout_fingerprint(ours), queue);
  ASSERT_EQ(scan.resident.size(), 1U);
  EXPECT_EQ(scan.resident[0].slot, 0U);
  EXPECT_EQ(scan.empty, 1U);  // its header region lies past the end of the file
}

TEST_F(SlotScanTest, AQueueWithWorkInFlightIsRefused) {
  write_file({slot_bytes(block(1), 1, layout())});
  DirectFile file(path_);
  IoQueue queue(2);
  std::vector<std::byte> sink(16);
  DirectFile plain(dir_ / "plain");
  ASSERT_TRUE(queue.read(plain.fd(), sink, 0, 99));
  EXPECT_THROW(scan_slots(file, SlotGeometry::of(layout()), 1, layout_fingerprint(layout()), queue), ContractError);
  (void)queue.wait();
}

}  // namespace
}  // namespace kvtier::tiers::disk
