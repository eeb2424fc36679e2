#pragma once
#include <compare>
#include <cstdint>
#include <functional>

namespace kvtier {

/// A value that cannot be mixed up with another id of the same representation
/// (a page id is not a sequence hash).
template <class Tag, class Rep>
class StrongId {
 public:
  using rep_type = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  constexpr Rep value() const noexcept { return value_; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

 private:
  Rep value_{};
};

struct PageIdTag;
/// Index of one physical G1 page in a KvPool.
using PageId = StrongId<PageIdTag, std::uint32_t>;

struct G2PageTag;
/// Index of one page of the G2 tier's pinned host pool (never a G1 page).
using G2Page = StrongId<G2PageTag, std::uint32_t>;

/// "No page" in raw page-index fields (free lists, intrusive links, index
/// lookups). Never a page: capacities stop below it (at most 0xFFFFFFF0).
inline constexpr std::uint32_t kNoPage = 0xFFFFFFFFU;

struct SequenceHashTag;
/// Dynamo's `SequenceHash` (router: `ExternalSequenceBlockHash`): identifies a full
/// block together with its whole prefix.
using SequenceHash = StrongId<SequenceHashTag, std::uint64_t>;

struct LocalBlockHashTag;
/// Dynamo's `BlockHash` (router: `LocalBlockHash` / `tokens_hash`): the block's own
/// tokens only; 0 means unknown.
using LocalBlockHash = StrongId<LocalBlockHashTag, std::uint64_t>;

}  // namespace kvtier

template <class Tag, class Rep>
struct std::hash<kvtier::StrongId<Tag, Rep>> {
  std::size_t operator()(kvtier::StrongId<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value()); }
};
