#include "kvtier/memory/runtime_factory.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::memory {
namespace {

TEST(RuntimeFactory, HostIsAlwaysAvailable) {
  const auto runtime = make_runtime(RuntimeChoice::Host);
  EXPECT_EQ(runtime->kind(), RuntimeKind::Host);
  EXPECT_GT(runtime->device_info().total_bytes, 0U);
}

TEST(RuntimeFactory, AutoPicksCudaOnlyWhenADeviceIsVisible) {
  const auto runtime = make_runtime(RuntimeChoice::Auto);
  EXPECT_EQ(runtime->kind(), cuda_device_count() > 0 ? RuntimeKind::Cuda : RuntimeKind::Host);
}

TEST(RuntimeFactory, ExplicitCudaWithoutADeviceIsAConfigError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_THROW((void)make_runtime(RuntimeChoice::Cuda), ConfigError);
}

TEST(RuntimeFactory, ParsesChoices) {
  EXPECT_EQ(parse_runtime_choice("auto"), RuntimeChoice::Auto);
  EXPECT_EQ(parse_runtime_choice("host"), RuntimeChoice::Host);
  EXPECT_EQ(parse_runtime_choice("cuda"), RuntimeChoice::Cuda);
  EXPECT_THROW((void)parse_runtime_choice("gpu"), ConfigError);
}

}  // namespace
}  // namespace kvtier::memory
