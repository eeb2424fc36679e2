#include "kvtier/core/unique_block.hpp"

namespace kvtier {

std::string UniqueBlock::to_string() const {
  return is_full() ? std::to_string(hash().value()) : "partial:" + uuid().to_string();
}

}  // namespace kvtier
