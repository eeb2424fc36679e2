#include "manager_session.hpp"

#include <atomic>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/memory/runtime_factory.hpp"

namespace kvtier::python {
namespace {

std::atomic<std::uint64_t> next_manager_id{1};

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

ManagerSession::ManagerSession(ManagerOptions options, std::vector<std::shared_ptr<KvEventSink>> extra_sinks)
    : id_(next_manager_id++), seed_(options.seed) {
  if (options.max_pending_events == 0) throw ConfigError("max_pending_events must be at least 1");
  events_ = std::make_shared<PendingEventSink>(options.max_pending_events);
  session::SessionConfig& config = options.session;
  config.event_sinks.insert(config.event_sinks.begin(), events_);
  config.event_sinks.insert(config.event_sinks.end(), extra_sinks.begin(), extra_sinks.end());
  session_ = std::make_unique<session::Session>(std::move(config));
}

void ManagerSession::check_caller_owner(std::uint64_t owner) {
  KVTIER_EXPECTS(owner < kFirstRequestOwner,
                 "owner " + std::to_string(owner) + " is a request's: MoveBlock-level owners are below 2^63");
}

RequestState ManagerSession::new_request(std::vector<TokenId> prompt, std::size_t max_output_tokens,
                                         bool emit_token_ids, std::vector<TokenId> planned_output) {
  KVTIER_EXPECTS(!prompt.empty(), "a request needs at least one prompt token");
  ActiveSequence sequence(std::move(prompt),
                          ActiveSequenceConfig{.block_size = manager().block_size(),
                                               .max_output_tokens = max_output_tokens,
                                               .enable_prefix_caching = manager().enable_prefix_caching(),
                                               .emit_token_ids = emit_token_ids,
                                               .planned_output = std::move(planned_output),
                                               .seed = seed_ ^ (next_request_seed_ * 0x9E3779B97F4A7C15ULL)});
  ++next_request_seed_;
  return RequestState{.manager_id = id_, .owner = g1::OwnerId(next_request_owner_++), .sequence = std::move(sequence)};
}

void ManagerSession::check_request(const RequestState& request) const {
  KVTIER_EXPECTS(request.manager_id == id_, "the request belongs to another manager");
}

void ManagerSession::check_handle(std::uint64_t manager_id, const char* what) const {
  KVTIER_EXPECTS(manager_id == id_, std::string(what) + " belong to another manager");
}

void ManagerSession::count_admission(const RequestState& request, std::size_t cached_blocks) {
  const std::size_t prompt_blocks = request.sequence.num_input_tokens() / manager().block_size();
  const std::size_t hits = std::min(cached_blocks, prompt_blocks);
  const std::size_t swapped = std::min<std::uint64_t>(swapped_in_unclaimed_, hits);
  const std::size_t from_lower = std::min<std::uint64_t>(swapped_in_from_lower_unclaimed_, swapped);
  const std::size_t from_g4 = std::min<std::uint64_t>(swapped_in_from_external_unclaimed_, from_lower);
  swapped_in_unclaimed_ = 0;
  swapped_in_from_lower_unclaimed_ = 0;
  swapped_in_from_external_unclaimed_ = 0;
  request_counts_.query_blocks += prompt_blocks;
  request_counts_.tier(metrics::Tier::G1).hit_blocks += hits - swapped;
  request_counts_.tier(metrics::Tier::G2).hit_blocks += swapped - from_lower;
  request_counts_.tier(metrics::Tier::G3).hit_blocks += from_lower - from_g4;
  request_counts_.tier(metrics::Tier::G4).hit_blocks += from_g4;
}

void ManagerSession::count_swap_in(std::uint64_t swap_in_id, std::size_t blocks) {
  const auto it = swap_ins_from_lower_.find(swap_in_id);
  if (it != swap_ins_from_lower_.end()) {
    swapped_in_from_lower_unclaimed_ += std::min(it->second.first, blocks);
    swapped_in_from_external_unclaimed_ += std::min(it->second.second, blocks);
    swap_ins_from_lower_.erase(it);
  }
  swapped_in_unclaimed_ += blocks;
}

metrics::KvMetrics ManagerSession::kv_metrics() const {
  metrics::KvMetrics m = session_->tier_metrics();
  m.query_blocks = request_counts_.query_blocks;
  for (const metrics::Tier tier : metrics::kTiers) m.tier(tier).hit_blocks = request_counts_.tier(tier).hit_blocks;
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
