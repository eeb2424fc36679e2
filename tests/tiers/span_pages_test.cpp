// Pages of several spans in G3 (what kvtier.sglang's HiCache backend drives):
// they come back byte for byte into other pages, after a restart too; spans
// outside the engine's memory or of another size are refused with nothing
// written; a damaged record is never a loaded page and its spans stay as they
// were; demoted pages are evicted first; calls from several threads over
// fewer staging rows than pages all complete.
#include "kvtier/tiers/rows/span_pages.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/rows/disk_rows.hpp"
#include "support/scratch_directory.hpp"

// A namespace of its own: the unity build puts this file beside the other row tests' helpers.
namespace kvtier::tiers::rows::span_pages_testing {
namespace {

// SGLang's page_first MHA page of a tiny model: K and V of 2 layers x 4 tokens x 2 heads x 8 x bf16.
constexpr std::size_t kSpan = 256;
constexpr std::size_t kPages = 12;

struct HostPool {
  // K pages then V pages, as two buffers of the pool.
  std::vector<std::byte> k = std::vector<std::byte>(kPages * kSpan);
  std::vector<std::byte> v = std::vector<std::byte>(kPages * kSpan);
  std::vector<MemorySpan> memory() { return {{k.data(), k.size()}, {v.data(), v.size()}}; }
  std::vector<MemorySpan> spans(const std::vector<std::size_t>& pages) {
    std::vector<MemorySpan> out;
    for (const std::size_t p : pages) {
      out.push_back({k.data() + p * kSpan, kSpan});
      out.push_back({v.data() + p * kSpan, kSpan});
    }
    return out;
  }
  void fill(std::size_t page, int seed) {
    for (std::size_t b = 0; b < kSpan; ++b) {
      k[page * kSpan + b] = static_cast<std::byte>((seed * 13 + b) & 0xFF);
      v[page * kSpan + b] = static_cast<std::byte>((seed * 29 + b * 3) & 0xFF);
    }
  }
  bool holds(std::size_t page, int seed) const {
    for (std::size_t b = 0; b < kSpan; ++b) {
      if (k[page * kSpan + b] != static_cast<std::byte>((seed * 13 + b) & 0xFF)) return false;
      if (v[page * kSpan + b] != static_cast<std::byte>((seed * 29 + b * 3) & 0xFF)) return false;
    }
    return true;
  }
};

std::vector<std::byte> key(int n) {  // an SGLang page key: 64 hex characters
  std::string text(64, '0');
  const std::string digits = std::to_string(n);
  text.replace(64 - digits.size(), digits.size(), digits);
  std::vector<std::byte> out;
  for (const char c : text) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::vector<std::vector<std::byte>> keys(const std::vector<int>& ns) {
  std::vector<std::vector<std::byte>> out;
  for (const int n : ns) out.push_back(key(n));
  return out;
}

class SpanPagesTest : public ::testing::Test {
 protected:
  void SetUp() override { scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-span-pages"); }
  std::unique_ptr<SpanPageTier> open(std::uint32_t slots, std::size_t staging = 4, std::string space = "m") {
    const DiskRowsConfig disk{.store = {.file = scratch_->path() / "g3.tier", .slots = slots, .queue_depth = 4},
                              .namespace_text = std::move(space)};
    return std::make_unique<SpanPageTier>(
        SpanPagesConfig{.span_bytes = {kSpan, kSpan}, .memory = pool_.memory(), .staging_pages = staging},
        [&](const RowRegion& region) { return open_disk_rows(disk, region); });
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  HostPool pool_;
};

TEST_F(SpanPagesTest, PagesComeBackIntoOtherPagesAndAfterARestart) {
  for (int p = 0; p < 6; ++p) pool_.fill(static_cast<std::size_t>(p), p + 1);
  {
    auto tier = open(16, 4);  // fewer staging rows than pages: two waves
    EXPECT_EQ(tier->page_bytes(), 2 * kSpan);
    EXPECT_EQ(tier->store(keys({1, 2, 3, 4, 5, 6}), pool_.spans({0, 1, 2, 3, 4, 5})), std::vector<bool>(6, true));
    EXPECT_EQ(tier->present(keys({1, 6, 7})), (std::vector<bool>{true, true, false}));
    EXPECT_EQ(tier->load(keys({6, 5, 4, 3, 2, 1}), pool_.spans({6, 7, 8, 9, 10, 11})), std::vector<bool>(6, true));
    for (int p = 6; p < 12; ++p) EXPECT_TRUE(pool_.holds(static_cast<std::size_t>(p), 12 - p)) << p;
    // Idempotent: the same keys again are held, nothing rewritten.
    EXPECT_EQ(tier->store(keys({1, 2}), pool_.spans({0, 1})), std::vector<bool>(2, true));
    EXPECT_EQ(tier->service().counters().keys_already_held, 2U);
  }
  std::memset(pool_.k.data(), 0, pool_.k.size());
  std::memset(pool_.v.data(), 0, pool_.v.size());
  auto again = open(16);
  EXPECT_EQ(again->load(keys({3, 9}), pool_.spans({0, 1})), (std::vector<bool>{true, false}));
  EXPECT_TRUE(pool_.holds(0, 3));
}

TEST_F(SpanPagesTest, SpansOutsideTheEnginesMemoryOrOfAnotherSizeAreRefusedWithNothingWritten) {
  auto tier = open(16);
  pool_.fill(0, 1);
  std::vector<MemorySpan> outside = pool_.spans({0});
  outside[1].data = pool_.v.data() + pool_.v.size() - kSpan / 2;  // runs past the V buffer
  EXPECT_THROW(tier->store(keys({1}), outside), ContractError);
  std::vector<std::byte> elsewhere(kSpan);
  outside[1].data = elsewhere.data();
  EXPECT_THROW(tier->load(keys({1}), outside), ContractError);
  std::vector<MemorySpan> short_span = pool_.spans({0});
  short_span[0].bytes = kSpan - 1;
  EXPECT_THROW(tier->store(keys({1}), short_span), ContractError);
  EXPECT_THROW(tier->store(keys({1, 2}), pool_.spans({0})), ContractError);
  EXPECT_THROW(tier->store({std::vector<std::byte>{}}, pool_.spans({0})), ContractError);
  EXPECT_EQ(tier->present(keys({1, 2})), (std::vector<bool>{false, false}));
  EXPECT_EQ(tier->service().counters().keys_stored, 0U);
}

TEST_F(SpanPagesTest, ADamagedRecordIsNeverALoadedPageAndItsSpansStayAsTheyWere) {
  for (int p = 0; p < 3; ++p) pool_.fill(static_cast<std::size_t>(p), p + 1);
  {
    auto tier = open(4);
    ASSERT_EQ(tier->store(keys({1, 2, 3}), pool_.spans({0, 1, 2})), std::vector<bool>(3, true));
  }
  // Flip one byte in the middle of every record's payload area after the header: each slot is 4 KiB header + row.
  const std::filesystem::path file = scratch_->path() / "g3.tier";
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(file));
  std::vector<std::byte> bytes(size);
  ASSERT_EQ(::pread(fd, bytes.data(), size, 0), static_cast<ssize_t>(size));
  // The record of page 2 (key 2): find its key's text in the file and damage a byte of its payload.
  const std::vector<std::byte> k2 = key(2);
  const auto at = std::search(bytes.begin(), bytes.end(), k2.begin(), k2.end());
  ASSERT_NE(at, bytes.end());
  const auto header = static_cast<std::size_t>(at - bytes.begin()) / 4096 * 4096;
  const std::byte flipped = bytes[header + 4096 + 100] ^ std::byte{0x40};
  ASSERT_EQ(::pwrite(fd, &flipped, 1, static_cast<off_t>(header + 4096 + 100)), 1);
  ::close(fd);

  pool_.fill(10, 99);
  auto tier = open(4);
  EXPECT_EQ(tier->load(keys({1, 2, 3}), pool_.spans({9, 10, 11})), (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(pool_.holds(9, 1));
  EXPECT_TRUE(pool_.holds(10, 99));  // untouched
  EXPECT_TRUE(pool_.holds(11, 3));
  EXPECT_EQ(tier->present(keys({2})), std::vector<bool>{false});  // dropped: it misses from now on
  EXPECT_EQ(tier->service().counters().checksum_failures, 1U);
}

TEST_F(SpanPagesTest, DemotedPagesAreEvictedFirstAndUsesKeepTheHeadOfAChain) {
  for (int p = 0; p < 5; ++p) pool_.fill(static_cast<std::size_t>(p), p + 1);
  auto tier = open(4);
  ASSERT_EQ(tier->store(keys({1, 2, 3, 4}), pool_.spans({0, 1, 2, 3})), std::vector<bool>(4, true));
  // A chain 1 -> 2 -> 3 -> 4 used tail first: its head is the most recent; 3 lost its prefix.
  tier->note_uses(keys({4, 3, 2, 1}), false);
  tier->note_uses(keys({3}), true);
  EXPECT_EQ(tier->store(keys({5}), pool_.spans({4})), std::vector<bool>{true});
  EXPECT_EQ(tier->present(keys({1, 2, 3, 4, 5})), (std::vector<bool>{true, true, false, true, true}));
  pool_.fill(4, 6);
  EXPECT_EQ(tier->store(keys({6}), pool_.spans({4})), std::vector<bool>{true});
  EXPECT_EQ(tier->present(keys({1, 2, 4})), (std::vector<bool>{true, true, false}));  // the tail went next
}

TEST_F(SpanPagesTest, CallsFromSeveralThreadsOverFewStagingRowsAllComplete) {
  for (int p = 0; p < 6; ++p) pool_.fill(static_cast<std::size_t>(p), p + 1);
  auto tier = open(128, 2);  // room for all 120 pages
  std::vector<std::thread> threads;
  std::vector<int> good(3, 0);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const int base = 100 * t + round * 2;
        const auto stored =
            tier->store(keys({base, base + 1}),
                        pool_.spans({static_cast<std::size_t>(2 * t), static_cast<std::size_t>(2 * t + 1)}));
        if (stored == std::vector<bool>(2, true)) ++good[static_cast<std::size_t>(t)];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good, std::vector<int>(3, 20));
  EXPECT_EQ(tier->load(keys({0, 101, 239}), pool_.spans({6, 7, 8})), std::vector<bool>(3, true));
  EXPECT_TRUE(pool_.holds(6, 1));
  EXPECT_TRUE(pool_.holds(7, 4));
  EXPECT_TRUE(pool_.holds(8, 6));
}

TEST_F(SpanPagesTest, AnotherNamespaceOrPageSizeIsRefused) {
  { auto tier = open(4, 4, "page_first bf16"); }
  EXPECT_THROW(open(4, 4, "layer_first bf16"), ConfigError);
  EXPECT_THROW((SpanPageTier(SpanPagesConfig{.span_bytes = {}, .memory = pool_.memory()},
                             [](const RowRegion&) -> RowStore { return {}; })),
               ConfigError);
}

}  // namespace
}  // namespace kvtier::tiers::rows::span_pages_testing
