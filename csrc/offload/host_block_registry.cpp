#include "kvtier/offload/host_block_registry.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::offload {

HostBlockRegistry::HostBlockRegistry(std::uint32_t capacity, g1::EvictionBackend eviction)
    : pages_(capacity), policy_(g1::make_eviction_policy(eviction, capacity)) {
  free_.reserve(capacity);
  for (std::uint32_t page = capacity; page-- > 0;) free_.emplace_back(page);  // page 0 is taken first
}

std::optional<G2Page> HostBlockRegistry::resident_page(const PositionalLineageHash& plh) const {
  const auto it = by_plh_.find(plh);
  if (it == by_plh_.end() || pages_[it->second.value()].state != State::Resident) return std::nullopt;
  return it->second;
}

std::vector<std::pair<G2Page, SequenceHash>> HostBlockRegistry::resident_blocks() const {
  std::vector<std::pair<G2Page, SequenceHash>> out;
  for (std::uint32_t page = 0; page < pages_.size(); ++page) {
    if (pages_[page].state == State::Resident) out.emplace_back(G2Page(page), pages_[page].block.hash);
  }
  return out;
}

bool HostBlockRegistry::is_resident(SequenceHash hash) const { return resident_hashes_.contains(hash.value()); }

std::optional<G2Page> HostBlockRegistry::reserve(g1::TieredBlock block, std::optional<Eviction>& evicted) {
  KVTIER_ASSERT(!contains(block.plh), "a block is reserved in G2 twice");
  evicted.reset();
  G2Page page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else {
    const auto victim = policy_->evict();
    if (!victim) return std::nullopt;
    page = G2Page(victim->value());  // the policy holds G2 pages by index
    evicted = Eviction{.block = pages_[page.value()].block, .checksum = pages_[page.value()].checksum};
    forget(page);
  }
  Page& p = pages_[page.value()];
  p.state = State::Landing;
  p.pins = 0;
  p.checksum = 0;
  p.block = std::move(block);
  by_plh_.emplace(p.block.plh, page);
  return page;
}

bool HostBlockRegistry::land(G2Page page, std::uint64_t checksum) {
  Page& p = pages_.at(page.value());
  KVTIER_ASSERT(p.state == State::Landing, "G2 page " + std::to_string(page.value()) + " lands but is not landing");
  if (policy_->insert_refusal(std::span<const PositionalLineageHash>(&p.block.plh, 1))) {
    drop(page);  // a lineage collision in the pool: keep the tier consistent, lose the copy
    return false;
  }
  p.state = State::Resident;
  p.checksum = checksum;
  ++resident_hashes_[p.block.hash.value()];
  policy_->touch(p.block.plh);
  policy_->insert(PageId(page.value()), p.block.plh);
  return true;
}

void HostBlockRegistry::drop(G2Page page) {
  Page& p = pages_.at(page.value());
  KVTIER_ASSERT(p.state != State::Free && p.pins == 0,
                "G2 page " + std::to_string(page.value()) + " is dropped while free or pinned");
  if (p.state == State::Resident) policy_->remove(PageId(page.value()));
  forget(page);
  free_.push_back(page);
}

void HostBlockRegistry::forget(G2Page page) {
  Page& p = pages_[page.value()];
  by_plh_.erase(p.block.plh);
  if (p.state == State::Resident) {
    const auto it = resident_hashes_.find(p.block.hash.value());
    if (--it->second == 0) resident_hashes_.erase(it);
  }
  p = Page{};
}

void HostBlockRegistry::pin(G2Page page) {
  Page& p = pages_.at(page.value());
  KVTIER_ASSERT(p.state == State::Resident, "G2 page " + std::to_string(page.value()) + " is pinned but not resident");
  if (p.pins++ == 0) policy_->remove(PageId(page.value()));
}

void HostBlockRegistry::unpin(G2Page page) {
  Page& p = pages_.at(page.value());
  KVTIER_ASSERT(p.state == State::Resident && p.pins > 0,
                "G2 page " + std::to_string(page.value()) + " is unpinned but not pinned");
  if (--p.pins == 0) policy_->insert(PageId(page.value()), p.block.plh);  // most recently used again
}

}  // namespace kvtier::offload
