#pragma once
#include <memory>
#include <string_view>

#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

enum class RuntimeChoice : std::uint8_t { Auto, Host, Cuda };

/// "auto", "host" or "cuda"; throws ConfigError otherwise.
RuntimeChoice parse_runtime_choice(std::string_view name);
/// Whether this build contains the CUDA runtime.
bool cuda_compiled() noexcept;
/// Visible CUDA devices (0 when not compiled or none present).
int cuda_device_count() noexcept;
/// Auto picks CUDA when a device is present, else the host runtime. An explicit
/// "cuda" without a CUDA build or device is a ConfigError.
std::unique_ptr<Runtime> make_runtime(RuntimeChoice choice);

}  // namespace kvtier::memory
