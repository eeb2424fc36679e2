#include "kvtier/offload/offload_engine.hpp"

#include <xxhash.h>

#include <algorithm>
#include <string>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/memory/page_copy_plan.hpp"

namespace kvtier::offload {
namespace {

memory::KvPool make_host_pool(memory::Runtime& runtime, const memory::KvPool& g1_pool, const OffloadConfig& config,
                              double& seconds) {
  if (config.host_blocks == 0) throw ConfigError("an offload engine needs host_blocks > 0");
  if (config.batch_blocks == 0) throw ConfigError("offload_batch must be at least one block");
  if (!(config.link_gbps >= 0.0)) throw ConfigError("link_gbps must be >= 0");
  // Each G2 block is one contiguous chunk whatever the G1 layout: page-major.
  const KvLayout layout(g1_pool.layout().geometry(), PageLayout::PageMajor, config.host_blocks);
  const auto start = std::chrono::steady_clock::now();
  memory::KvPool pool(runtime, layout, memory::PoolMemory::PinnedHost);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return pool;
}

constexpr double kBytesPerMsPerGbps = 1e6;

}  // namespace

namespace {

std::vector<std::unique_ptr<tiers::LowerTier>> one_or_none(std::unique_ptr<tiers::LowerTier> lower) {
  std::vector<std::unique_ptr<tiers::LowerTier>> lowers;
  if (lower) lowers.push_back(std::move(lower));
  return lowers;
}

}  // namespace

OffloadEngine::OffloadEngine(memory::Runtime& runtime, memory::KvPool& g1_pool, OffloadConfig config,
                             std::unique_ptr<tiers::LowerTier> lower)
    : OffloadEngine(runtime, g1_pool, config, one_or_none(std::move(lower))) {}

OffloadEngine::OffloadEngine(memory::Runtime& runtime, memory::KvPool& g1_pool, OffloadConfig config,
                             std::vector<std::unique_ptr<tiers::LowerTier>> lowers)
    : runtime_(runtime),
      g1_pool_(g1_pool),
      config_(config),
      host_pool_(make_host_pool(runtime, g1_pool, config_, allocation_seconds_)),
      registry_(config.host_blocks, config.g2_eviction.value_or(g1::EvictionBackend::Lineage)),
      lowers_(std::move(lowers)),
      g2_admission_(config.g2_admission, std::size_t{2} * config.host_blocks),
      offload_stream_(runtime.create_stream()),
      onboard_stream_(runtime.create_priority_stream()),
      offload_link_(config.link_gbps * kBytesPerMsPerGbps),
      onboard_link_(config.link_gbps * kBytesPerMsPerGbps) {
  const std::size_t page_bytes = g1_pool.layout().page_bytes();
  for (std::size_t t = 0; t < lowers_.size(); ++t) {
    KVTIER_EXPECTS(lowers_[t] != nullptr, "a tier below G2 is null");
    if (lowers_[t]->page_bytes() != page_bytes) {
      throw ConfigError("the tier below G2 holds pages of " + std::to_string(lowers_[t]->page_bytes()) +
                        " bytes, G2 pages of " + std::to_string(page_bytes));
    }
    for (std::size_t u = 0; u < t; ++u) {
      if (lowers_[u]->medium() == lowers_[t]->medium()) throw ConfigError("two tiers below G2 of one medium");
    }
  }
  if (!lowers_.empty()) {
    promoted_pages_.assign(config_.host_blocks, 0);
    declined_on_landing_.assign(config_.host_blocks, 0);
  }
  lower_usages_.resize(lowers_.size());
  for (const auto& lower : lowers_) {
    const TierAdmission admission =
        lower->medium() == StorageTier::External ? config_.shared_admission : config_.disk_admission;
    lower_admissions_.emplace_back(admission, std::size_t{2} * lower->capacity());
  }
  const std::uint32_t ring = config_.staging_pages.value_or(
      runtime.kind() == memory::RuntimeKind::Cuda && page_bytes < config_.staging_below_bytes
          ? static_cast<std::uint32_t>(std::clamp<std::size_t>((std::size_t{64} << 20) / page_bytes, 2, 4096))
          : 0);
  if (ring > 0) {
    const KvLayout layout(g1_pool.layout().geometry(), PageLayout::PageMajor, ring);
    out_ring_ = std::make_unique<memory::KvPool>(runtime, layout, memory::PoolMemory::Device);
    in_ring_ = std::make_unique<memory::KvPool>(runtime, layout, memory::PoolMemory::Device);
  }
}

OffloadEngine::~OffloadEngine() {
  for (auto& [id, transfer] : transfers_) {
    try {
      transfer.done.synchronize();
    } catch (const Error&) {
      // its failure no longer matters to anyone; the copy has stopped
    }
  }
}

void OffloadEngine::bind(KvEventPublisher& publisher, g1::G1Backend backend) {
  KVTIER_EXPECTS(publisher_ == nullptr, "the offload engine is attached to a manager already");
  registry_ = HostBlockRegistry(
      config_.host_blocks, config_.g2_eviction.value_or(backend == g1::G1Backend::Kvbm ? g1::EvictionBackend::Lineage
                                                                                       : g1::EvictionBackend::Lru));
  publisher_ = &publisher;
  // What a lower tier recovered at open is announced, so a router's view
  // of it starts whole and a later Removed names a block it was told of.
  for (const auto& lower : lowers_) {
    for (const g1::TieredBlock& block : lower->resident_blocks()) publish_stored(lower->medium(), block);
  }
}

void OffloadEngine::publish_stored(StorageTier tier, const g1::TieredBlock& block) {
  KvStored stored{.parent = block.parent, .blocks = {{block.hash, block.local}}, .token_ids = std::nullopt};
  if (block.token_ids) stored.token_ids.emplace().append(*block.token_ids);
  if (groups_.empty()) {
    publisher_->publish_stored(tier, std::move(stored));
  } else if (block.plh.high() < groups_.size()) {
    publisher_->publish_stored(tier, std::move(stored), groups_[block.plh.high()]);
  }
}

void OffloadEngine::publish_removed(StorageTier tier, std::vector<g1::TieredBlock> blocks) {
  if (blocks.empty()) return;
  if (groups_.empty()) {
    KvRemoved removed;
    for (const g1::TieredBlock& block : blocks) removed.hashes.push_back(block.hash);
    publisher_->publish_removed(tier, std::move(removed));
    return;
  }
  // One event per group, in the order each group's first block was removed.
  std::vector<KvRemoved> by_group(groups_.size());
  std::vector<std::size_t> order;
  for (const g1::TieredBlock& block : blocks) {
    const std::size_t g = block.plh.high();
    if (g >= groups_.size()) continue;
    if (by_group[g].hashes.empty()) order.push_back(g);
    by_group[g].hashes.push_back(block.hash);
  }
  for (const std::size_t g : order) publisher_->publish_removed(tier, std::move(by_group[g]), groups_[g]);
}

void OffloadEngine::bind_groups(KvEventPublisher& publisher, std::vector<KvEventGroup> groups,
                                std::vector<std::uint64_t> fingerprints) {
  KVTIER_EXPECTS(publisher_ == nullptr, "the offload engine is attached to a manager already");
  KVTIER_EXPECTS(!groups.empty() && groups.size() == fingerprints.size(),
                 "bind_groups takes each group's event fields and block fingerprint");
  groups_ = std::move(groups);
  formats_ = tiers::BlockFormats(0, std::move(fingerprints));
  bind(publisher, g1::G1Backend::Native);
}

std::vector<bool> OffloadEngine::holds(std::span<const PositionalLineageHash> plhs) {
  std::vector<bool> held(plhs.size(), false);
  std::vector<PositionalLineageHash> rest;
  std::vector<std::size_t> rest_at;
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    if (registry_.resident_page(plhs[i])) {
      held[i] = true;
    } else {
      rest.push_back(plhs[i]);
      rest_at.push_back(i);
    }
  }
  for (const auto& lower : lowers_) {
    if (rest.empty()) break;
    const auto found = lower->lookup(rest);
    std::vector<PositionalLineageHash> still;
    std::vector<std::size_t> still_at;
    for (std::size_t j = 0; j < rest.size(); ++j) {
      if (found[j] && formats_.accepts(*found[j])) {
        held[rest_at[j]] = true;
      } else {
        still.push_back(rest[j]);
        still_at.push_back(rest_at[j]);
      }
    }
    rest = std::move(still);
    rest_at = std::move(still_at);
  }
  return held;
}

double OffloadEngine::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - epoch_).count();
}

void OffloadEngine::inject_copy_fault(std::uint64_t nth) {
  KVTIER_EXPECTS(runtime_.faults() != nullptr, "copy faults can be injected on the host runtime only");
  KVTIER_EXPECTS(nth != 0, "inject_fault copy_batch counts from 1");
  fault_at_batch_ = submitted_batches_ + nth;
}

void OffloadEngine::submit(std::uint64_t id, Transfer& transfer) {
  // The G2 slab is a KvPool: its pages are indexed as a pool's are.
  std::vector<PageId> host_pages;
  host_pages.reserve(transfer.g2_pages.size());
  for (const G2Page page : transfer.g2_pages) host_pages.emplace_back(page.value());
  const bool out = transfer.direction == Direction::SwapOut;
  memory::Stream& stream = out ? offload_stream_ : onboard_stream_;
  transfer.bytes = host_pages.size() * host_pool_.layout().page_bytes();
  transfer.started_ms = now_ms();
  if (++submitted_batches_ == fault_at_batch_) {
    // The runtime's next copy is this batch's: the engine is its only caller on this thread.
    runtime_.faults()->inject_faults({.fail_copy_number = 1});
  }
  const bool staged =
      out_ring_ && host_pages.size() > 1 && host_pool_.layout().page_bytes() < config_.staging_below_bytes;
  if (staged) {
    submit_staged(stream, out ? *out_ring_ : *in_ring_, transfer, host_pages);
    ++staged_transfers_;
  } else {  // one batched submission; contiguous runs are one descriptor each
    stream.copy_async(out ? memory::page_copy_plan(g1_pool_, transfer.g1_pages, host_pool_, host_pages)
                          : memory::page_copy_plan(host_pool_, host_pages, g1_pool_, transfer.g1_pages));
  }
  stream.record(transfer.done);
  transfer.started = true;
  transfer.submitted = true;
  (out ? offload_link_ : onboard_link_).start(id, transfer.started_ms, static_cast<double>(transfer.bytes));
}

void OffloadEngine::submit_staged(memory::Stream& stream, memory::KvPool& ring, const Transfer& transfer,
                                  std::span<const PageId> host_pages) {
  const bool out = transfer.direction == Direction::SwapOut;
  const std::size_t count = host_pages.size();
  for (std::size_t first = 0; first < count; first += ring.capacity()) {
    const std::size_t n = std::min<std::size_t>(ring.capacity(), count - first);
    std::vector<PageId> slots(n);
    for (std::size_t i = 0; i < n; ++i) slots[i] = PageId(static_cast<std::uint32_t>(i));
    const auto g1_pages = std::span<const PageId>(transfer.g1_pages).subspan(first, n);
    const auto g2_pages = host_pages.subspan(first, n);
    if (out) {
      stream.gather_async(memory::page_copy_plan(g1_pool_, g1_pages, ring, slots));  // scattered -> contiguous
      stream.copy_async(memory::page_copy_plan(ring, slots, host_pool_, g2_pages));  // contiguous runs -> G2
    } else {
      stream.copy_async(memory::page_copy_plan(host_pool_, g2_pages, ring, slots));
      stream.gather_async(memory::page_copy_plan(ring, slots, g1_pool_, g1_pages));
    }
  }
}

g1::SwapOutTicket OffloadEngine::swap_out(std::span<const g1::EvictedBlock> victims) {
  KVTIER_EXPECTS(publisher_ != nullptr, "the offload engine is not attached to a manager");
  std::vector<g1::TieredBlock> evicted;
  std::vector<PageId> sources;
  std::vector<G2Page> targets;
  for (const g1::EvictedBlock& victim : victims) {
    if (!formats_.accepts(victim.block)) {
      ++format_refusals_;  // not its key's group format: never stored, never served
      continue;
    }
    if (registry_.contains(victim.block.plh)) continue;    // presence filter: resident or landing already
    if (!g2_admission_.admit(victim.block.plh)) continue;  // declined: G1 frees the page, nothing copied
    const auto page = reserve_page(victim.block, evicted);
    if (!page) continue;  // no room in G2: the block is simply gone
    sources.push_back(victim.page);
    targets.push_back(*page);
  }
  publish_removed(StorageTier::HostPinned, std::move(evicted));
  g1::SwapOutTicket ticket;
  for (std::size_t first = 0; first < sources.size(); first += config_.batch_blocks) {
    const std::size_t last = std::min(sources.size(), first + config_.batch_blocks);
    std::vector<PageId> g1_pages(sources.begin() + static_cast<std::ptrdiff_t>(first),
                                 sources.begin() + static_cast<std::ptrdiff_t>(last));
    std::vector<G2Page> g2_pages(targets.begin() + static_cast<std::ptrdiff_t>(first),
                                 targets.begin() + static_cast<std::ptrdiff_t>(last));
    const std::uint64_t id = next_transfer_++;
    Transfer& transfer = transfers_
                             .emplace(id, Transfer{.direction = Direction::SwapOut,
                                                   .g1_pages = g1_pages,
                                                   .g2_pages = g2_pages,
                                                   .done = runtime_.create_event()})
                             .first->second;
    try {
      submit(id, transfer);
    } catch (const Error&) {
      // The copy could not be enqueued: nothing reads these sources, so they
      // are not quarantined and the blocks never reach G2.
      for (const G2Page page : g2_pages) registry_.drop(page);
      transfers_.erase(id);
      ++failed_transfers_;
      continue;
    }
    ticket.transfer = id;
    ticket.quarantined.insert(ticket.quarantined.end(), g1_pages.begin(), g1_pages.end());
  }
  return ticket;
}

g1::TransferState OffloadEngine::settle(std::uint64_t id, Transfer& transfer, bool wait) {
  if (transfer.state != g1::TransferState::Pending || !transfer.started) return transfer.state;
  if (!transfer.submitted) {  // a swap-in whose lower-tier reads have not all ended
    if (!wait) return transfer.state;
    wait_lower(id, transfer);
    if (!transfer.submitted) return transfer.state;
  }
  if (wait) {
    try {
      transfer.done.synchronize();
    } catch (const Error&) {
      // read back as Failed below
    }
  }
  const memory::EventStatus status = transfer.done.status();
  if (status == memory::EventStatus::Pending) return transfer.state;
  if (status == memory::EventStatus::Complete) {
    transfer.state = g1::TransferState::Complete;
    learn_bandwidth(transfer);
    count_usage(transfer);
  } else {
    transfer.state = g1::TransferState::Failed;
    ++failed_transfers_;
  }
  (transfer.direction == Direction::SwapOut ? offload_link_ : onboard_link_).remove(id);
  return transfer.state;
}

void OffloadEngine::learn_bandwidth(const Transfer& transfer) {
  // Observed at poll time, so an upper bound on the copy's duration: the
  // estimate errs towards later deadlines, never earlier ones.
  const double elapsed = now_ms() - transfer.started_ms;
  if (elapsed <= 0.0 || transfer.bytes == 0) return;
  const double measured = static_cast<double>(transfer.bytes) / elapsed;
  ProcessorSharingLink& link = transfer.direction == Direction::SwapOut ? offload_link_ : onboard_link_;
  link.set_bandwidth(link.bandwidth() <= 0.0 ? measured : 0.8 * link.bandwidth() + 0.2 * measured);
}

void OffloadEngine::count_usage(const Transfer& transfer) {
  const auto direction = static_cast<std::size_t>(transfer.direction);
  const double end = now_ms();
  CopyUsage& usage = usage_[direction];
  ++usage.transfers;
  usage.bytes += transfer.bytes;
  // The union of in-flight intervals: overlapping transfers count once.
  usage.busy_ms += std::max(0.0, end - std::max(transfer.started_ms, busy_until_ms_[direction]));
  busy_until_ms_[direction] = std::max(busy_until_ms_[direction], end);
}

std::uint64_t OffloadEngine::checksum(G2Page page) const {
  const std::byte* bytes = host_pool_.chunk_address(PageId(page.value()), 0);
  return XXH3_64bits(bytes, host_pool_.layout().page_bytes());
}

g1::TierProgress OffloadEngine::poll(bool wait) {
  g1::TierProgress progress;
  if (!lowers_.empty()) {
    for (std::size_t tier = 0; tier < lowers_.size(); ++tier) apply_lower(tier, lowers_[tier]->poll(wait));
    for (auto& [id, transfer] : transfers_) issue_lower_reads(id, transfer);
  }
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& transfer = it->second;
    const g1::TransferState state = settle(it->first, transfer, wait);
    if (state == g1::TransferState::Pending || transfer.reported) {
      ++it;
      continue;
    }
    progress.completed.push_back(it->first);
    if (state == g1::TransferState::Failed) progress.failed.push_back(it->first);
    if (transfer.direction == Direction::SwapIn) {
      transfer.reported = true;  // kept until the manager registers or reaps it
      ++it;
      continue;
    }
    for (std::size_t i = 0; i < transfer.g2_pages.size(); ++i) {
      const G2Page page = transfer.g2_pages[i];
      if (state == g1::TransferState::Failed) {
        registry_.drop(page);  // never stored: no event
        continue;
      }
      const g1::TieredBlock block = registry_.block(page);
      if (!registry_.land(page, config_.verify_swaps ? checksum(page) : 0)) continue;
      publish_stored(StorageTier::HostPinned, block);
      for (std::size_t tier = 0; tier < lowers_.size(); ++tier) {
        if (lowers_[tier]->write_through() && !offer_to_lower(tier, page, block)) {
          declined_on_landing_[page.value()] |= static_cast<std::uint8_t>(1U << tier);
        }
      }
    }
    progress.released.insert(progress.released.end(), transfer.g1_pages.begin(), transfer.g1_pages.end());
    it = transfers_.erase(it);
  }
  const double now = now_ms();
  (void)offload_link_.advance_to(now);  // the model's view only; real completions rule
  (void)onboard_link_.advance_to(now);
  return progress;
}

std::optional<double> OffloadEngine::earliest_deadline_ms() const {
  const auto a = offload_link_.earliest_finish();
  const auto b = onboard_link_.earliest_finish();
  if (a && b) return std::min(*a, *b);
  return a ? a : b;
}

g1::SwapInCopy OffloadEngine::prepare_swap_in(std::span<const PositionalLineageHash> plhs) {
  KVTIER_EXPECTS(publisher_ != nullptr, "the offload engine is not attached to a manager");
  g1::SwapInCopy copy;
  std::vector<G2Page> sources;
  std::vector<bool> pinned;
  std::vector<std::size_t> lower_positions;
  std::vector<std::uint8_t> source_of;  // per position: the lower tier it is read from
  std::vector<g1::TieredBlock> evicted;
  // Each lower tier is asked once, for every block from the first it is
  // asked about (one round trip to a shared store), nearest tier first.
  std::vector<std::optional<std::size_t>> asked_from(lowers_.size());
  std::vector<std::vector<std::optional<g1::TieredBlock>>> answers(lowers_.size());
  const auto held = [&](std::size_t tier, std::size_t i) -> const std::optional<g1::TieredBlock>& {
    if (!asked_from[tier]) {
      answers[tier] = lowers_[tier]->lookup(plhs.subspan(i));
      asked_from[tier] = i;
    }
    return answers[tier][i - *asked_from[tier]];
  };
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const PositionalLineageHash& plh = plhs[i];
    if (const auto page = registry_.resident_page(plh)) {
      if (!formats_.accepts(registry_.block(*page))) {
        ++format_refusals_;  // never served into another group or format
        break;
      }
      if (config_.verify_swaps && checksum(*page) != registry_.checksum(*page)) {
        ++verify_failures_;
        if (!registry_.pinned(*page)) {  // another swap-in reading it keeps it until it ends
          g1::TieredBlock block = registry_.block(*page);
          registry_.drop(*page);
          publish_removed(StorageTier::HostPinned, {std::move(block)});
        }
        break;  // the request recomputes from here
      }
      registry_.pin(*page);  // now: a page reserved below for a lower-tier block must not evict it
      // A hit in G2 is a second sighting: the tiers below admit the block when G2 lets it go.
      for (AdmissionFilter& admission : lower_admissions_) admission.note(plh);
      if (!lowers_.empty() && promoted_pages_[page->value()] != 0) {
        const std::size_t tier = promoted_pages_[page->value()] - 1U;
        promoted_pages_[page->value()] = 0;
        ++copy.from_lower;
        if (lower_medium(tier) == StorageTier::External) ++copy.from_external;
      }
      sources.push_back(*page);
      source_of.push_back(0);
      pinned.push_back(true);
      copy.blocks.push_back(registry_.block(*page));
      continue;
    }
    // Only the tier below holds it: it lands in a G2 page first (G3 -> G2 -> G1).
    if (lowers_.empty() || registry_.contains(plh)) break;
    const std::optional<g1::TieredBlock>* block = nullptr;
    std::size_t tier = 0;
    for (; tier < lowers_.size(); ++tier) {
      block = &held(tier, i);
      if (block->has_value()) break;
    }
    if (tier == lowers_.size()) break;
    if (!formats_.accepts(**block)) {
      ++format_refusals_;
      break;
    }
    const auto page = reserve_page(**block, evicted);
    if (!page) break;
    lower_positions.push_back(sources.size());
    if (lower_medium(tier) == StorageTier::External) ++copy.from_external;
    sources.push_back(*page);
    source_of.push_back(static_cast<std::uint8_t>(tier));
    pinned.push_back(false);  // pinned when its read lands
    copy.blocks.push_back(**block);
  }
  if (!evicted.empty()) publish_removed(StorageTier::HostPinned, std::move(evicted));
  if (sources.empty()) return copy;
  copy.transfer = next_transfer_++;
  copy.from_lower += lower_positions.size();
  Transfer& transfer = transfers_
                           .emplace(copy.transfer, Transfer{.direction = Direction::SwapIn,
                                                            .g1_pages = {},
                                                            .g2_pages = std::move(sources),
                                                            .done = runtime_.create_event(),
                                                            .started = false,
                                                            .submitted = false,
                                                            .pinned = std::move(pinned),
                                                            .lower_unissued = lower_positions,
                                                            .lower_source = std::move(source_of),
                                                            .lower_pending = lower_positions.size()})
                           .first->second;
  if (transfer.lower_pending > 0) issue_lower_reads(copy.transfer, transfer);
  return copy;
}

void OffloadEngine::start_swap_in(std::uint64_t transfer, std::span<const PageId> g1_pages) {
  Transfer& t = swap_in(transfer);
  KVTIER_EXPECTS(!t.started, "swap-in " + std::to_string(transfer) + " was started already");
  KVTIER_EXPECTS(g1_pages.size() == t.g2_pages.size(), "a swap-in needs one G1 page per block");
  t.g1_pages.assign(g1_pages.begin(), g1_pages.end());
  if (t.lower_pending > 0 || t.lower_failed) {  // the copy waits for its lower-tier reads
    t.started = true;
    if (t.lower_pending == 0) lower_settled(transfer, t);
    return;
  }
  try {
    submit(transfer, t);
  } catch (...) {
    t.g1_pages.clear();
    throw;
  }
}

OffloadEngine::Transfer& OffloadEngine::swap_in(std::uint64_t transfer) {
  const auto it = transfers_.find(transfer);
  KVTIER_EXPECTS(it != transfers_.end() && it->second.direction == Direction::SwapIn,
                 "unknown swap-in transfer " + std::to_string(transfer));
  return it->second;
}

const OffloadEngine::Transfer& OffloadEngine::swap_in(std::uint64_t transfer) const {
  return const_cast<OffloadEngine*>(this)->swap_in(transfer);
}

g1::TransferState OffloadEngine::swap_in_state(std::uint64_t transfer) const {
  const Transfer& t = swap_in(transfer);
  if (t.state != g1::TransferState::Pending || !t.started || !t.submitted) return t.state;
  switch (t.done.status()) {
    case memory::EventStatus::Pending:
      return g1::TransferState::Pending;
    case memory::EventStatus::Complete:
      return g1::TransferState::Complete;
    case memory::EventStatus::Failed:
      break;
  }
  return g1::TransferState::Failed;
}

g1::TransferState OffloadEngine::wait_swap_in(std::uint64_t transfer) {
  return settle(transfer, swap_in(transfer), true);
}

void OffloadEngine::finish_swap_in(std::uint64_t transfer) {
  Transfer& t = swap_in(transfer);
  KVTIER_EXPECTS(!t.started || settle(transfer, t, false) != g1::TransferState::Pending,
                 "a swap-in is finished while it copies");
  for (std::size_t i = 0; i < t.g2_pages.size(); ++i) {
    if (t.pinned[i]) registry_.unpin(t.g2_pages[i]);
  }
  // Its lower-tier blocks not yet read: nothing writes their Landing pages.
  for (const std::size_t position : t.lower_unissued) registry_.drop(t.g2_pages[position]);
  // Those being read land unowned when the read ends (a page is never freed under I/O).
  for (auto& [read, load] : lower_loads_) {  // by (tier, read id)
    if (load.transfer == transfer) load.transfer = 0;
  }
  transfers_.erase(transfer);
}

g1::TierStats OffloadEngine::stats() const {
  g1::TierStats stats{.used = registry_.used(),
                      .capacity = registry_.capacity(),
                      .in_flight = 0,
                      .verify_failures = verify_failures_,
                      .failed_transfers = failed_transfers_,
                      .format_refusals = format_refusals_,
                      .admission_declined = g2_admission_.declined()};
  for (const auto& [id, transfer] : transfers_) {
    if (transfer.started && !transfer.reported)
      ++stats.in_flight;  // not yet applied by a poll, whatever its copy is doing now
  }
  return stats;
}

}  // namespace kvtier::offload
