#pragma once
#include <cstddef>
#include <optional>
#include <variant>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/unique_block.hpp"

namespace kvtier {

/// "This request now needs these blocks." `blocks` is a contiguous slice of the
/// request; `local_hashes`, `plhs` and `token_ids` are aligned with its full
/// blocks; `parent` is the request block just before the slice.
struct UseSignal {
  std::vector<UniqueBlock> blocks;
  std::vector<LocalBlockHash> local_hashes;
  std::vector<PositionalLineageHash> plhs;
  std::optional<BlockTokenIds> token_ids;
  std::optional<UniqueBlock> parent;

  std::size_t full_block_count() const noexcept;
  friend bool operator==(const UseSignal&, const UseSignal&) = default;
};

/// Release one ownership of each block, leaf first (reverse position order).
struct DerefSignal {
  std::vector<UniqueBlock> blocks;
  friend bool operator==(const DerefSignal&, const DerefSignal&) = default;
};

/// The request's partial block `uuid` is now full with identity `hash`.
struct PromoteSignal {
  Uuid uuid;
  SequenceHash hash;
  std::optional<SequenceHash> parent;
  LocalBlockHash local;
  PositionalLineageHash plh;
  std::optional<std::vector<TokenId>> token_ids;
  friend bool operator==(const PromoteSignal&, const PromoteSignal&) = default;
};

using MoveBlock = std::variant<UseSignal, DerefSignal, PromoteSignal>;

/// "use", "deref" or "promote": the names the script format prints.
const char* signal_name(const MoveBlock& signal) noexcept;

}  // namespace kvtier
