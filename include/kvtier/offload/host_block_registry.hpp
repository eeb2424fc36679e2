#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/g1/offload_tier.hpp"

namespace kvtier::offload {

/// The G2 tier's bookkeeping (docs/offload.md): which block each pinned-host
/// page holds, keyed by positional lineage hash, with the Lineage eviction of
/// docs/semantics.md §5.1. Pages only; the bytes live in the engine's KvPool.
///   Free -> Landing (reserved: a swap-out copy writes it)
///   Landing -> Resident (the copy completed) | Free (it failed)
///   Resident -> pinned while swap-ins read it; evictable when unpinned
class HostBlockRegistry {
 public:
  HostBlockRegistry(std::uint32_t capacity, g1::EvictionBackend eviction);

  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(pages_.size()); }
  /// Landing or resident pages.
  std::size_t used() const noexcept { return pages_.size() - free_.size(); }
  /// Resident or landing already: the presence filter of §5.2.
  bool contains(const PositionalLineageHash& plh) const { return by_plh_.contains(plh); }
  /// The page holding `plh`, when it is resident.
  std::optional<G2Page> resident_page(const PositionalLineageHash& plh) const;
  bool is_resident(SequenceHash hash) const;

  /// A resident block the eviction policy took to make room; its page still
  /// holds its bytes until the caller writes the page.
  struct Eviction {
    g1::TieredBlock block;
    std::uint64_t checksum = 0;
  };
  /// A page for `block` to land in: a free one, else the eviction policy's
  /// victim (set in `evicted`); nullopt when every page is landing or pinned.
  std::optional<G2Page> reserve(g1::TieredBlock block, std::optional<Eviction>& evicted);
  /// The landing copy completed: the page becomes resident and evictable.
  /// false (the page is freed instead) when the eviction pool refuses it.
  bool land(G2Page page, std::uint64_t checksum);
  /// A landing page whose copy failed, or an unpinned resident page whose
  /// bytes failed verification, goes back to the free pages.
  void drop(G2Page page);
  void pin(G2Page page);
  void unpin(G2Page page);
  bool pinned(G2Page page) const { return pages_.at(page.value()).pins > 0; }

  std::vector<std::pair<G2Page, SequenceHash>> resident_blocks() const;
  const g1::TieredBlock& block(G2Page page) const { return pages_.at(page.value()).block; }
  std::uint64_t checksum(G2Page page) const { return pages_.at(page.value()).checksum; }

 private:
  enum class State : std::uint8_t { Free, Landing, Resident };
  struct Page {
    State state = State::Free;
    std::uint32_t pins = 0;
    std::uint64_t checksum = 0;
    g1::TieredBlock block;
  };
  void forget(G2Page page);

  std::vector<Page> pages_;
  std::vector<G2Page> free_;
  std::unique_ptr<g1::EvictionPolicy> policy_;
  std::unordered_map<PositionalLineageHash, G2Page> by_plh_;
  std::unordered_map<std::uint64_t, std::uint32_t> resident_hashes_;  // sequence hash -> resident pages holding it
};

}  // namespace kvtier::offload
