#include "kvtier/core/move_block.hpp"

#include <algorithm>

namespace kvtier {

std::size_t UseSignal::full_block_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(blocks.begin(), blocks.end(), [](const UniqueBlock& b) { return b.is_full(); }));
}

const char* signal_name(const MoveBlock& signal) noexcept {
  switch (signal.index()) {
    case 0:
      return "use";
    case 1:
      return "deref";
    default:
      return "promote";
  }
}

}  // namespace kvtier
