#include "kvtier/session/session.hpp"

#include <utility>

#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/session/shared_tier_factory.hpp"

namespace kvtier::session {

PageMemory::PageMemory(std::unique_ptr<memory::Runtime> runtime, const KvLayout& layout)
    : owned_runtime_(std::move(runtime)),
      runtime_(owned_runtime_.get()),
      pool_(std::make_unique<memory::KvPool>(*runtime_, layout)) {}

PageMemory::PageMemory(memory::Runtime& runtime, const KvLayout& layout)
    : runtime_(&runtime), pool_(std::make_unique<memory::KvPool>(runtime, layout)) {}

Session::Session(SessionConfig config) : config_(std::move(config)) { build(nullptr); }

Session::Session(memory::Runtime& runtime, SessionConfig config) : config_(std::move(config)) { build(&runtime); }

void Session::build(memory::Runtime* borrowed) {
  config_.validate();
  config_.geometry.tokens_per_block = config_.manager.block_size;
  const KvLayout layout = config_.kv_layout();
  // The manager checks its settings before any memory is allocated.
  std::vector<std::shared_ptr<KvEventSink>> sinks{tier_events_};
  sinks.insert(sinks.end(), config_.event_sinks.begin(), config_.event_sinks.end());
  auto manager = std::make_unique<g1::G1Manager>(config_.manager, std::move(sinks));
  if (borrowed != nullptr) {
    memory_ = std::make_shared<PageMemory>(*borrowed, layout);
  } else {
    memory_ = std::make_shared<PageMemory>(memory::make_runtime(config_.device), layout);
  }
  if (config_.host_blocks != 0) {
    // G2 pages are page-major whatever G1's layout: so are the tiers' below it.
    const KvLayout g2_layout(layout.geometry(), PageLayout::PageMajor, 1);
    std::vector<std::unique_ptr<tiers::LowerTier>> lowers;  // nearest first: G3, then G4
    if (config_.disk) lowers.push_back(open_disk_tier(*config_.disk, g2_layout));
    if (config_.shared) lowers.push_back(open_shared_tier(*config_.shared, g2_layout));
    engine_ = std::make_shared<offload::OffloadEngine>(
        runtime(), pool(),
        offload::OffloadConfig{.host_blocks = config_.host_blocks,
                               .batch_blocks = config_.offload_batch.value_or(offload::OffloadConfig{}.batch_blocks),
                               .verify_swaps = config_.verify_swaps},
        std::move(lowers));
    manager->attach_offload_engine(engine_);
  }
  manager_ = std::move(manager);
}

metrics::KvMetrics Session::tier_metrics() const {
  metrics::KvMetrics m;
  metrics::read_tiers(*manager_, engine_.get(), m);
  tier_events_->add_to(m);
  return m;
}

std::uint64_t Session::pattern_identity(const UniqueBlock& block) noexcept {
  if (block.is_full()) return block.hash().value();
  return block.uuid().high() ^ (block.uuid().low() * 0x9E3779B97F4A7C15ULL);
}

std::vector<std::uint64_t> Session::pattern_identities(g1::OwnerId owner) const {
  std::vector<std::uint64_t> identities;
  const auto blocks = manager_->owned_blocks(owner);
  identities.reserve(blocks.size());
  for (const UniqueBlock& block : blocks) identities.push_back(pattern_identity(block));
  return identities;
}

const tiers::LowerTier* Session::lower_tier(StorageTier medium) const noexcept {
  return engine_ ? engine_->lower_tier(medium) : nullptr;
}

std::vector<std::pair<const char*, std::uint64_t>> Session::lower_tier_counters() const {
  std::vector<std::pair<const char*, std::uint64_t>> counters;
  if (const tiers::LowerTier* disk = lower_tier(StorageTier::Disk)) counters = disk_tier_counters(*disk);
  if (const tiers::LowerTier* shared = lower_tier(StorageTier::External)) {
    const auto more = shared_tier_counters(*shared);
    counters.insert(counters.end(), more.begin(), more.end());
  }
  return counters;
}

}  // namespace kvtier::session
