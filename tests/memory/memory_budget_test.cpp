// Allocations are checked against the memory there is before they are
// zero-filled (issue 23: every pool was zeroed in full, and the OOM killer
// ended runs that asked for more than the machine had).
#include "kvtier/memory/memory_budget.hpp"

#include <gtest/gtest.h>

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::memory {
namespace {

TEST(MemoryBudget, AnAllocationMayTakeNinetyPercentOfWhatIsAvailable) {
  EXPECT_NO_THROW(check_allocation_fits(900, 1000, "device", "host memory"));
  try {
    check_allocation_fits(901, 1000, "device", "host memory");
    FAIL() << "accepted";
  } catch (const AllocationError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("device allocation of 901 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("of the 1000 bytes"), std::string::npos) << what;
  }
}

TEST(MemoryBudget, TheHostMemoryAvailableIsKnownAndBelowThePhysicalMemory) {
  const auto available = available_host_memory();
  ASSERT_TRUE(available) << "/proc/meminfo has MemAvailable on every Linux since 3.14";
  EXPECT_GT(*available, 0U);
  HostRuntime runtime;
  EXPECT_LE(*available, runtime.device_info().total_bytes);
}

TEST(MemoryBudget, APoolLargerThanTheMachineIsRefusedBeforeAnyPageIsTouched) {
  HostRuntime runtime;
  const std::size_t total = runtime.device_info().total_bytes;
  // 2 MiB pages, enough of them to be twice the machine.
  const KvGeometry geometry{
      .layers = 32, .kv_heads = 8, .head_dim = 128, .dtype = KvDtype::Bf16, .tokens_per_block = 16};
  const auto pages = static_cast<std::uint32_t>(std::min<std::size_t>(2 * total / (2U << 20) + 1, UINT32_MAX));
  EXPECT_THROW(KvPool(runtime, KvLayout(geometry, PageLayout::PageMajor, pages)), AllocationError);
  EXPECT_THROW(KvPool(runtime, KvLayout(geometry, PageLayout::PageMajor, pages), PoolMemory::PinnedHost),
               AllocationError);
  EXPECT_THROW(KvPool(runtime, KvLayout(geometry, PageLayout::PageMajor, pages), PoolMemory::PinnedHost, 1U << 30),
               AllocationError)
      << "pinned in pieces: the pieces together are checked";
  EXPECT_THROW(runtime.allocate_pinned(2 * total), AllocationError);
  EXPECT_NO_THROW(KvPool(runtime, KvLayout(geometry, PageLayout::PageMajor, 8)));
}

}  // namespace
}  // namespace kvtier::memory
