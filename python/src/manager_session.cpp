#include "manager_session.hpp"

#include <atomic>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/runtime_factory.hpp"

namespace kvtier::python {
namespace {

std::atomic<std::uint64_t> next_manager_id{1};

g1::G1ManagerConfig manager_config(const ManagerOptions& o) {
  if (o.backend != "native" && o.backend != "kvbm") {
    throw ConfigError("backend must be \"native\" or \"kvbm\", not \"" + o.backend + "\"");
  }
  if (o.backend == "native" && o.eviction) throw ConfigError("eviction applies to the kvbm backend only");
  if (o.host_blocks == 0 && (o.offload_batch || o.verify_swaps)) {
    throw ConfigError("offload_batch and verify_swaps need the offload tier (host_blocks > 0)");
  }
  if (o.max_pending_events == 0) throw ConfigError("max_pending_events must be at least 1");
  return g1::G1ManagerConfig{.capacity = o.capacity,
                             .block_size = o.block_size,
                             .dp_rank = o.dp_rank,
                             .backend = o.backend == "kvbm" ? g1::G1Backend::Kvbm : g1::G1Backend::Native,
                             .enable_prefix_caching = o.prefix_caching,
                             .eviction = g1::parse_eviction_backend(o.eviction.value_or("lineage"))};
}

}  // namespace

void PendingEventSink::publish(const KvEvent& event) {
  const std::lock_guard lock(mutex_);
  if (events_.size() == limit_) {
    events_.pop_front();
    ++dropped_;
  }
  ++received_;
  events_.push_back(event);
  if (keep_fresh_) fresh_.push_back(event);
}

void PendingEventSink::keep_fresh(bool on) {
  const std::lock_guard lock(mutex_);
  keep_fresh_ = on;
  if (!on) fresh_.clear();
}

std::vector<KvEvent> PendingEventSink::take_fresh() {
  const std::lock_guard lock(mutex_);
  return std::exchange(fresh_, {});
}

std::vector<KvEvent> PendingEventSink::take() {
  const std::lock_guard lock(mutex_);
  std::vector<KvEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

std::uint64_t PendingEventSink::received() const {
  const std::lock_guard lock(mutex_);
  return received_;
}

std::uint64_t PendingEventSink::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

ManagerSession::ManagerSession(const ManagerOptions& options, std::vector<std::shared_ptr<KvEventSink>> extra_sinks)
    : id_(next_manager_id++), options_(options), events_(std::make_shared<PendingEventSink>(options.max_pending_events)) {
  const g1::G1ManagerConfig config = manager_config(options);
  const KvGeometry geometry{.layers = options.layers,
                            .kv_heads = options.kv_heads,
                            .head_dim = options.head_dim,
                            .dtype = parse_dtype(options.dtype),
                            .tokens_per_block = options.block_size};
  const KvLayout layout(geometry, parse_page_layout(options.layout), options.capacity);
  std::vector<std::shared_ptr<KvEventSink>> sinks{events_, tier_events_};
  sinks.insert(sinks.end(), extra_sinks.begin(), extra_sinks.end());
  auto manager = std::make_unique<g1::G1Manager>(config, std::move(sinks));
  memory_ = std::make_shared<PageMemory>(memory::make_runtime(memory::parse_runtime_choice(options.device)), layout);
  if (options.host_blocks != 0) {
    engine_ = std::make_shared<offload::OffloadEngine>(
        runtime(), pool(),
        offload::OffloadConfig{.host_blocks = options.host_blocks,
                               .batch_blocks = options.offload_batch.value_or(offload::OffloadConfig{}.batch_blocks),
                               .verify_swaps = options.verify_swaps});
    manager->attach_offload_engine(engine_);
  }
  manager_ = std::move(manager);
}

PageMemory::PageMemory(std::unique_ptr<memory::Runtime> r, const KvLayout& layout)
    : runtime(std::move(r)), pool(std::make_unique<memory::KvPool>(*runtime, layout)) {}

PageMemory::~PageMemory() { pool.reset(); }  // before the runtime its slab and stream came from

void ManagerSession::check_caller_owner(std::uint64_t owner) {
  if (owner >= kFirstRequestOwner) {
    throw ContractError("owner " + std::to_string(owner) + " is a request's: MoveBlock-level owners are below 2^63");
  }
}

RequestState ManagerSession::new_request(std::vector<TokenId> prompt, std::size_t max_output_tokens,
                                         bool emit_token_ids, std::vector<TokenId> planned_output) {
  if (prompt.empty()) throw ContractError("a request needs at least one prompt token");
  ActiveSequence sequence(std::move(prompt),
                          ActiveSequenceConfig{.block_size = manager_->block_size(),
                                               .max_output_tokens = max_output_tokens,
                                               .enable_prefix_caching = manager_->enable_prefix_caching(),
                                               .emit_token_ids = emit_token_ids,
                                               .planned_output = std::move(planned_output),
                                               .seed = options_.seed ^ (next_request_seed_ * 0x9E3779B97F4A7C15ULL)});
  ++next_request_seed_;
  return RequestState{.manager_id = id_, .owner = g1::OwnerId(next_request_owner_++), .sequence = std::move(sequence)};
}

void ManagerSession::check_request(const RequestState& request) const {
  if (request.manager_id != id_) throw ContractError("the request belongs to another manager");
}

void ManagerSession::check_handle(std::uint64_t manager_id, const char* what) const {
  if (manager_id != id_) throw ContractError(std::string(what) + " belong to another manager");
}

std::uint64_t ManagerSession::pattern_identity(const UniqueBlock& block) noexcept {
  if (block.is_full()) return block.hash().value();
  return block.uuid().high() ^ (block.uuid().low() * 0x9E3779B97F4A7C15ULL);
}

std::vector<std::uint64_t> ManagerSession::pattern_identities(g1::OwnerId owner) const {
  std::vector<std::uint64_t> identities;
  for (const UniqueBlock& block : manager_->owned_blocks(owner)) identities.push_back(pattern_identity(block));
  return identities;
}

void ManagerSession::count_admission(const RequestState& request, std::size_t cached_blocks) {
  const std::size_t prompt_blocks = request.sequence.num_input_tokens() / manager_->block_size();
  const std::size_t hits = std::min(cached_blocks, prompt_blocks);
  const std::size_t from_g2 = std::min<std::uint64_t>(swapped_in_unclaimed_, hits);
  swapped_in_unclaimed_ = 0;
  request_counts_.query_blocks += prompt_blocks;
  request_counts_.tier(metrics::Tier::G1).hit_blocks += hits - from_g2;
  request_counts_.tier(metrics::Tier::G2).hit_blocks += from_g2;
}

metrics::KvMetrics ManagerSession::kv_metrics() const {
  metrics::KvMetrics m = request_counts_;
  metrics::read_tiers(*manager_, engine_.get(), m);
  tier_events_->add_to(m);
  m.events_dropped = events_->dropped();
  m.events_published = events_->received() - m.events_dropped;
  return m;
}

#if KVTIER_WITH_PROMETHEUS
metrics::PrometheusMetrics& ManagerSession::prometheus() {
  if (!prometheus_) prometheus_ = std::make_unique<metrics::PrometheusMetrics>();
  return *prometheus_;
}
#endif

}  // namespace kvtier::python
