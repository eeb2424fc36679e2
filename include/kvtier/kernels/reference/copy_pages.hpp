#pragma once
#include <cstddef>
#include <span>

namespace kvtier::kernels {

/// One chunk of a page copy (a whole page-major page, or one layer's part of
/// a layer-major page).
struct PageChunkCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  std::size_t bytes = 0;
};

namespace reference {

/// CPU reference of copy_pages: every chunk copied, in any order (chunks
/// must not overlap). Throws ContractError for a null pointer with bytes.
void copy_pages(std::span<const PageChunkCopy> chunks);

}  // namespace reference
}  // namespace kvtier::kernels
