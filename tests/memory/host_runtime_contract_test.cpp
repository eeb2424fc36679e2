#include "kvtier/memory/host_runtime.hpp"
#include "memory/group_work_contract.hpp"
#include "memory/kv_write_contract.hpp"
#include "memory/runtime_contract.hpp"

namespace kvtier::memory::testing {
namespace {

struct HostRuntimeTraits {
  static std::unique_ptr<Runtime> make() { return std::make_unique<HostRuntime>(); }
  static const char* unavailable() { return nullptr; }
};

using HostRuntimes = ::testing::Types<HostRuntimeTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(Host, RuntimeContract, HostRuntimes);
INSTANTIATE_TYPED_TEST_SUITE_P(Host, GroupWorkContract, HostRuntimes);
INSTANTIATE_TYPED_TEST_SUITE_P(Host, KvWriteContract, HostRuntimes);

}  // namespace
}  // namespace kvtier::memory::testing
