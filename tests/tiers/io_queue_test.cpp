// The G3 tier's I/O: io_uring reads and writes of aligned slots through a
// bounded queue, on a file opened for direct I/O where the file system allows it.
#include "kvtier/tiers/disk/io_queue.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/disk/direct_file.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::tiers::disk {
namespace {

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;

AlignedBuffer aligned(std::size_t bytes) {
  return AlignedBuffer(static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, bytes)));
}

class IoQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-io-queue");
    dir_ = scratch_->path();
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;
};

TEST_F(IoQueueTest, AlignedSlotsRoundTripThroughABoundedQueue) {
  DirectFile file(dir_ / "slots");
  constexpr std::size_t kSlot = 64 * 1024;
  constexpr std::size_t kSlots = 8;
  file.resize(kSlot * kSlots);
  IoQueue queue(4);
  std::vector<AlignedBuffer> out;
  for (std::size_t s = 0; s < kSlots; ++s) {
    out.push_back(aligned(kSlot));
    for (std::size_t i = 0; i < kSlot; ++i) out.back()[i] = static_cast<std::byte>((s * 131 + i * 7) & 0xFF);
  }
  std::size_t next = 0;
  std::size_t done = 0;
  while (done < kSlots) {
    while (next < kSlots &&
           queue.write(file.fd(), std::span<const std::byte>(out[next].get(), kSlot), next * kSlot, next)) {
      ++next;
    }
    EXPECT_LE(queue.in_flight(), 4U);
    for (const IoQueue::Completion& c : queue.wait()) {
      EXPECT_EQ(c.result, static_cast<std::int64_t>(kSlot)) << "slot " << c.tag;
      ++done;
    }
  }
  std::vector<AlignedBuffer> in;
  const auto check_reads = [&](const std::vector<IoQueue::Completion>& reads) {
    for (const IoQueue::Completion& c : reads)
      EXPECT_EQ(c.result, static_cast<std::int64_t>(kSlot)) << "slot " << c.tag;
  };
  for (std::size_t s = 0; s < kSlots; ++s) {
    in.push_back(aligned(kSlot));
    while (!queue.read(file.fd(), std::span<std::byte>(in.back().get(), kSlot), s * kSlot, s))
      check_reads(queue.wait());
  }
  while (queue.in_flight() > 0) check_reads(queue.wait());
  for (std::size_t s = 0; s < kSlots; ++s) {
    EXPECT_EQ(std::memcmp(in[s].get(), out[s].get(), kSlot), 0) << "slot " << s;
  }
}

TEST_F(IoQueueTest, AFullQueueRefusesMoreAndTakesAgainAfterReaping) {
  DirectFile file(dir_ / "full");
  file.resize(3 * kRecordAlignment);
  IoQueue queue(2);
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < 3; ++i) buffers.push_back(aligned(kRecordAlignment));
  const auto span = [&](int i) { return std::span<std::byte>(buffers[i].get(), kRecordAlignment); };
  EXPECT_TRUE(queue.read(file.fd(), span(0), 0, 0));
  EXPECT_TRUE(queue.read(file.fd(), span(1), kRecordAlignment, 1));
  EXPECT_TRUE(queue.full());
  EXPECT_FALSE(queue.read(file.fd(), span(2), 2 * kRecordAlignment, 2));
  std::size_t reaped = 0;
  while (reaped < 2) reaped += queue.wait().size();
  EXPECT_TRUE(queue.read(file.fd(), span(2), 2 * kRecordAlignment, 2));
  const auto last = queue.wait();
  ASSERT_EQ(last.size(), 1U);
  EXPECT_EQ(last[0].tag, 2U);
}

TEST_F(IoQueueTest, FailuresAndShortReadsAreResultsNotExceptions) {
  DirectFile file(dir_ / "short");
  file.resize(kRecordAlignment);
  IoQueue queue(2);
  AlignedBuffer buffer = aligned(2 * kRecordAlignment);
  ASSERT_TRUE(queue.read(file.fd(), std::span<std::byte>(buffer.get(), 2 * kRecordAlignment), 0, 7));
  auto done = queue.wait();
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].result, static_cast<std::int64_t>(kRecordAlignment));  // the file ends after one unit
  ASSERT_TRUE(queue.read(-1, std::span<std::byte>(buffer.get(), kRecordAlignment), 0, 8));
  done = queue.wait();
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].result, -EBADF);
}

TEST_F(IoQueueTest, AFileSystemWithoutDirectIoFallsBackToBufferedIo) {
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) GTEST_SKIP() << "no /dev/shm here";
  const std::filesystem::path path = shm / ("kvtier_io_queue_" + std::to_string(::getpid()));
  {
    DirectFile file(path);
    if (file.direct()) GTEST_SKIP() << "/dev/shm accepts O_DIRECT here";
    IoQueue queue(1);
    std::vector<std::byte> unaligned(100, std::byte{0x5A});
    ASSERT_TRUE(queue.write(file.fd(), unaligned, 3, 1));
    auto done = queue.wait();
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].result, 100);
    EXPECT_EQ(file.size(), 103U);
  }
  std::filesystem::remove(path);
}

TEST_F(IoQueueTest, AFileThatCannotBeOpenedIsAConfigError) {
  EXPECT_THROW(DirectFile(dir_ / "missing" / "slots"), ConfigError);
}

}  // namespace
}  // namespace kvtier::tiers::disk
