#include "kvtier/kernels/reference/copy_pages.hpp"

#include <cstring>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::kernels::reference {

void copy_pages(std::span<const CopyDescriptor> chunks) {
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].bytes != 0 && (chunks[i].src == nullptr || chunks[i].dst == nullptr)) {
      throw ContractError("copy_pages: chunk " + std::to_string(i) + " has a null pointer");
    }
  }
  for (const CopyDescriptor& chunk : chunks) {
    if (chunk.bytes != 0) std::memcpy(chunk.dst, chunk.src, chunk.bytes);
  }
}

}  // namespace kvtier::kernels::reference
