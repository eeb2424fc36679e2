#include "kvtier/session/session.hpp"

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "kvtier/core/expects.hpp"

#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/session/shared_tier_factory.hpp"

namespace kvtier::session {

PageMemory::PageMemory(std::unique_ptr<memory::Runtime> runtime, const KvLayout& layout)
    : owned_runtime_(std::move(runtime)),
      runtime_(owned_runtime_.get()),
      pool_(std::make_unique<memory::KvPool>(*runtime_, layout)) {}

PageMemory::PageMemory(memory::Runtime& runtime, const KvLayout& layout)
    : runtime_(&runtime), pool_(std::make_unique<memory::KvPool>(runtime, layout)) {}

namespace {

/// A manager with KV cache groups: every page of the pool is the groups' one
/// page size (ModelGeometry::page_bytes, rounded up to a multiple of 4 bytes,
/// or the session's group_page_bytes), a byte range each group's format fills
/// (model-geometry.md §2).
KvLayout grouped_pool_layout(std::uint64_t page_bytes, std::uint32_t capacity) {
  const KvGeometry bytes{.layers = 1,
                         .kv_heads = 1,
                         .head_dim = static_cast<std::uint32_t>((page_bytes + 3) / 4),
                         .dtype = KvDtype::Fp8,
                         .tokens_per_block = 2};
  return KvLayout(bytes, PageLayout::PageMajor, capacity);
}

}  // namespace

Session::Session(SessionConfig config) : config_(std::move(config)) { build(nullptr); }

Session::Session(memory::Runtime& runtime, SessionConfig config) : config_(std::move(config)) { build(&runtime); }

void Session::build(memory::Runtime* borrowed) {
  config_.validate();
  config_.geometry.tokens_per_block = config_.manager.block_size;
  // Without groups the layout is checked first, as it always was; a manager
  // with groups makes its pool's page from them.
  std::optional<KvLayout> layout;
  if (config_.manager.groups.empty()) layout = config_.kv_layout();
  // The manager checks its settings before any memory is allocated.
  std::vector<std::shared_ptr<KvEventSink>> sinks{tier_events_};
  sinks.insert(sinks.end(), config_.event_sinks.begin(), config_.event_sinks.end());
  auto manager = std::make_unique<g1::G1Manager>(config_.manager, std::move(sinks));
  if (!manager->has_groups() && !config_.manager.groups.empty()) {
    // One plain full-attention group: today's pages, in the group's geometry.
    const GroupSpec& group = manager->geometry()->groups().front().spec;
    config_.geometry.layers = group.layers;
    config_.geometry.kv_heads = group.kv_heads;
    config_.geometry.head_dim = group.head_dim;
    config_.geometry.dtype = group.dtype;
  }
  if (!layout) {
    layout = manager->has_groups()
                 ? grouped_pool_layout(config_.group_page_bytes.value_or(manager->geometry()->page_bytes()),
                                       config_.manager.capacity)
                 : config_.kv_layout();
  }
  if (borrowed != nullptr) {
    memory_ = std::make_shared<PageMemory>(*borrowed, *layout);
  } else {
    memory_ = std::make_shared<PageMemory>(memory::make_runtime(config_.device), *layout);
  }
  if (config_.host_blocks != 0) {
    // G2 pages are page-major whatever G1's layout: so are the tiers' below it.
    const KvLayout g2_layout(layout->geometry(), PageLayout::PageMajor, 1);
    std::vector<std::unique_ptr<tiers::LowerTier>> lowers;  // nearest first: G3, then G4
    std::optional<tiers::TierKey> key;
    if (const auto key_file = config_.effective_tier_key_file()) key = tiers::TierKey::from_file(*key_file);
    const tiers::TierKey* tier_key = key ? &*key : nullptr;
    // With groups each record carries its group's block fingerprint (tiers::BlockFormats).
    std::vector<std::uint64_t> group_formats;
    if (manager->has_groups()) {
      for (std::size_t g = 0; g < manager->geometry()->group_count(); ++g) {
        group_formats.push_back(manager->geometry()->block_fingerprint(g));
      }
    }
    if (config_.disk) lowers.push_back(open_disk_tier(*config_.disk, g2_layout, tier_key, group_formats));
    if (config_.shared) lowers.push_back(open_shared_tier(*config_.shared, g2_layout, tier_key, group_formats));
    engine_ = std::make_shared<offload::OffloadEngine>(
        runtime(), pool(),
        offload::OffloadConfig{.host_blocks = config_.host_blocks,
                               .batch_blocks = config_.offload_batch.value_or(offload::OffloadConfig{}.batch_blocks),
                               .verify_swaps = config_.verify_swaps,
                               .g2_admission = config_.g2_admission,
                               .disk_admission = config_.g3_admission,
                               .shared_admission = config_.g4_admission,
                               .g2_eviction = config_.g2_eviction},
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

memory::DeviceBlockTables Session::block_tables(std::span<const g1::OwnerId> owners, memory::Stream& stream,
                                                std::span<const std::int32_t> seq_lens, std::uint32_t columns) {
  std::vector<std::span<const PageId>> tables;
  tables.reserve(owners.size());
  std::size_t longest = columns;
  for (const g1::OwnerId owner : owners) {
    KVTIER_EXPECTS(manager_->has_owner(owner), "block tables: owner ", owner.value(), " holds no blocks");
    tables.push_back(manager_->block_table(owner));
    longest = std::max(longest, tables.back().size());
  }
  const auto rows = static_cast<std::uint32_t>(std::max<std::size_t>(owners.size(), 1));
  const auto blocks = static_cast<std::uint32_t>(std::max<std::size_t>(longest, 1));
  if (!tables_ || tables_->max_rows() < rows || tables_->max_blocks() < blocks) {
    // Work on `stream` may still read the old tables: it finishes before they go.
    stream.synchronize();
    const std::uint32_t grown_rows = std::max(std::bit_ceil(rows), tables_ ? tables_->max_rows() : 8U);
    const std::uint32_t grown_blocks = std::max(std::bit_ceil(blocks), tables_ ? tables_->max_blocks() : 16U);
    tables_.reset();
    tables_ = std::make_unique<memory::BlockTableBuilder>(runtime(), grown_rows, grown_blocks);
  }
  return tables_->build(tables, stream, seq_lens, columns);
}

kernels::GroupPages Session::group_pages(std::size_t group) const {
  const ModelGeometry* geometry = manager_->geometry();
  KVTIER_EXPECTS(geometry != nullptr, "group_pages is for a manager with KV cache groups");
  // One plain full-attention group keeps today's pages: page-major, they are the group's format.
  KVTIER_EXPECTS(manager_->has_groups() || pool().layout().layout() == PageLayout::PageMajor,
                 "group_pages: a single full-attention group is addressed as a group in the page-major layout only");
  KVTIER_EXPECTS(group < geometry->group_count(), "group ", group, " is not one of the manager's ",
                 geometry->group_count());
  const ResolvedGroup& g = geometry->groups()[group];
  const kernels::GroupPages pages{.format = g.format(),
                                  .layers = g.spec.layers,
                                  .page_stride = pool().layout().page_bytes(),
                                  .capacity = pool().capacity()};
  KVTIER_EXPECTS(pages.group_page_bytes() <= pages.page_stride, "group ", group, "'s pages hold ",
                 pages.group_page_bytes(), " bytes, the pool's pages in memory ", pages.page_stride,
                 " (group_page_bytes shrinks them: leave it unset for the model's real pages)");
  return pages;
}

driver::RequestDriver Session::driver() {
  memory::KvPool* pool = &memory_->pool();
  return driver::RequestDriver(*manager_, [pool](std::span<const PageId> pages) { pool->zero_pages(pages); });
}

memory::Stream& Session::compute_stream() {
  if (!compute_stream_) compute_stream_ = std::make_unique<memory::Stream>(runtime().create_stream());
  return *compute_stream_;
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
