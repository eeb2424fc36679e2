#include "kvtier/core/stored_token_ids.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier {

StoredTokenIds::StoredTokenIds(const BlockTokenIds& blocks) {
  if (!blocks.empty()) reserve(blocks.size(), blocks.front().size());
  for (const auto& block : blocks) append(block);
}

void StoredTokenIds::append(std::span<const TokenId> block) {
  if (tokens_.empty() && block_size_ == 0) block_size_ = block.size();
  KVTIER_EXPECTS(block.size() == block_size_ && !block.empty(), "token id lists of one event must all hold " +
                                                                    std::to_string(block_size_) + " ids, not " +
                                                                    std::to_string(block.size()));
  tokens_.insert(tokens_.end(), block.begin(), block.end());
}

BlockTokenIds StoredTokenIds::nested() const {
  BlockTokenIds out;
  out.reserve(size());
  for (std::size_t b = 0; b < size(); ++b) out.emplace_back((*this)[b].begin(), (*this)[b].end());
  return out;
}

}  // namespace kvtier
