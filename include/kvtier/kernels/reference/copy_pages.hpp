#pragma once
#include <span>

#include "kvtier/core/copy_descriptor.hpp"

namespace kvtier::kernels {

namespace reference {

/// CPU reference of copy_pages: every chunk copied, in any order (chunks
/// must not overlap). Throws ContractError for a null pointer with bytes.
void copy_pages(std::span<const CopyDescriptor> chunks);

}  // namespace reference
}  // namespace kvtier::kernels
