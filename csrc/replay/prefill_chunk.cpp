#include "kvtier/replay/prefill_chunk.hpp"

#include <algorithm>

namespace kvtier::replay {

std::size_t prefill_chunk(std::size_t computed, std::size_t length, std::size_t prompt, std::size_t budget,
                          std::size_t align_unit) {
  const std::size_t chunk = std::min(length - std::min(length, computed), budget);
  if (align_unit == 0 || length > prompt) return chunk;
  const std::size_t last_aligned = prompt - prompt % align_unit;
  const std::size_t after = computed + chunk;
  if (after < last_aligned) {
    const std::size_t end = after / align_unit * align_unit;  // the state lands on a block boundary
    return end > computed ? end - computed : 0;
  }
  if (computed < last_aligned && last_aligned < after) return last_aligned - computed;
  return chunk;
}

}  // namespace kvtier::replay
