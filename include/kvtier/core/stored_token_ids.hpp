#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "kvtier/core/block_hash.hpp"

namespace kvtier {

/// The token ids of a Stored run's blocks, flat: block i's ids are
/// [i * block_size, (i + 1) * block_size). One allocation per event instead of
/// one per block (a run of 64 blocks is a single copy); every block holds the
/// same number of ids (the manager's block size, which G1Manager checks).
class StoredTokenIds {
 public:
  StoredTokenIds() = default;
  /// From one list per block (tests, callers holding nested lists); throws
  /// ContractError when the lists differ in length.
  StoredTokenIds(const BlockTokenIds& blocks);  // NOLINT(google-explicit-constructor): a value, like the lists

  void reserve(std::size_t blocks, std::size_t block_size) { tokens_.reserve(blocks * block_size); }
  /// Appends one block's ids; ContractError when its length differs from the first block's.
  void append(std::span<const TokenId> block);

  /// Blocks held.
  std::size_t size() const noexcept { return block_size_ == 0 ? 0 : tokens_.size() / block_size_; }
  bool empty() const noexcept { return tokens_.empty(); }
  std::size_t block_size() const noexcept { return block_size_; }
  std::span<const TokenId> operator[](std::size_t block) const noexcept {
    return {tokens_.data() + block * block_size_, block_size_};
  }
  /// Every block's ids in order (vLLM's BlockStored.token_ids).
  std::span<const TokenId> flat() const noexcept { return tokens_; }
  /// One list per block (the script's JSON form).
  BlockTokenIds nested() const;

  friend bool operator==(const StoredTokenIds&, const StoredTokenIds&) = default;

 private:
  std::vector<TokenId> tokens_;
  std::size_t block_size_ = 0;
};

}  // namespace kvtier
