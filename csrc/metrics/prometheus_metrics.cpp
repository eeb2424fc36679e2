#include "kvtier/metrics/prometheus_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <vector>

namespace kvtier::metrics {
namespace {

/// A Prometheus counter fed with running totals.
class TotalCounter {
 public:
  explicit TotalCounter(prometheus::Counter& counter) : counter_(&counter) {}
  void advance_to(double total) {
    if (total <= last_) return;
    counter_->Increment(total - last_);
    last_ = total;
  }

 private:
  prometheus::Counter* counter_;
  double last_ = 0.0;
};

/// Wall times of one scheduler step: 10 µs to 1 s.
const std::vector<double> kStepBuckets{1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1, 1.0};

}  // namespace

struct PrometheusMetrics::Series {
  Series(std::shared_ptr<prometheus::Registry> shared, prometheus::Labels labels)
      : registry(shared ? std::move(shared) : std::make_shared<prometheus::Registry>()), base(std::move(labels)) {}

  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Labels base;  // on every series (engine="i" for one of several instances)
  prometheus::Family<prometheus::Gauge>& usage_perc =
      gauge("kvtier:kv_cache_usage_perc",
            "Fraction of the tier's blocks in use (G1: held by running requests; G2: resident or landing), 0 to 1");
  prometheus::Family<prometheus::Gauge>& capacity =
      gauge("kvtier:kv_cache_capacity_blocks", "Blocks the tier holds at most");
  prometheus::Family<prometheus::Gauge>& used =
      gauge("kvtier:kv_cache_used_blocks", "Blocks in use (G1: held by running requests; G2: resident or landing)");
  prometheus::Family<prometheus::Gauge>& cached =
      gauge("kvtier:kv_cache_cached_blocks",
            "Blocks kept for reuse that no request holds (G1: inactive; G2: resident or landing)");
  prometheus::Family<prometheus::Counter>& hits =
      counter("kvtier:prefix_cache_hit_blocks_total",
              "Prompt blocks found in the tier after missing every tier above it, at a request's first admission");
  prometheus::Family<prometheus::Counter>& misses =
      counter("kvtier:prefix_cache_miss_blocks_total",
              "Prompt blocks that missed the tier and every tier above it, at a request's first admission");
  prometheus::Family<prometheus::Counter>& stored =
      counter("kvtier:kv_cache_stored_blocks_total", "Blocks that became visible in the tier (KV Stored events)");
  prometheus::Family<prometheus::Counter>& evicted =
      counter("kvtier:kv_cache_evicted_blocks_total", "Blocks whose last copy left the tier (KV Removed events)");
  prometheus::Family<prometheus::Counter>& checksum_failures =
      counter("kvtier:kv_checksum_failures_total",
              "Blocks whose checksum no longer matched when read back (dropped, never served)");
  prometheus::Family<prometheus::Counter>& transfer_blocks =
      counter("kvtier:kv_transfer_blocks_total", "Blocks moved between tiers by completed copies");
  prometheus::Family<prometheus::Counter>& transfer_bytes =
      counter("kvtier:kv_transfer_bytes_total", "Bytes moved between tiers by completed copies");
  prometheus::Family<prometheus::Counter>& transfers =
      counter("kvtier:kv_transfers_total", "Completed copy transfers between tiers (one batched submission each)");

  TotalCounter queries{
      counter("kvtier:prefix_cache_query_blocks_total", "Full prompt blocks asked for at a request's first admission")
          .Add(base)};
  TotalCounter failed_transfers{
      counter("kvtier:kv_transfer_failures_total", "Copies that failed: their blocks were dropped, not served")
          .Add(base)};
  // Series of counts only some front doors make (the replay): registered on first use.
  std::optional<TotalCounter> operations;
  std::optional<TotalCounter> pages_verified;
  std::optional<TotalCounter> mismatches;
  TotalCounter events_published{
      counter("kvtier:kv_events_published_total", "KV events handed to their consumers (the ZMQ publisher or Python)")
          .Add(base)};
  TotalCounter events_dropped{counter("kvtier:kv_events_dropped_total", "KV events lost to a full queue").Add(base)};
  prometheus::Histogram& step_seconds =
      prometheus::BuildHistogram()
          .Name("kvtier:scheduler_step_duration_seconds")
          .Help("Wall time of one scheduler step: allocator calls, K/V writes and checks")
          .Register(*registry)
          .Add(base, kStepBuckets);

  struct TierSeries {
    prometheus::Gauge* usage_perc;
    prometheus::Gauge* capacity;
    prometheus::Gauge* used;
    prometheus::Gauge* cached;
    TotalCounter hits;
    TotalCounter misses;
    TotalCounter stored;
    TotalCounter evicted;
    std::optional<TotalCounter> checksum_failures;  // tiers that checksum what they hold (not G1)
  };
  struct TransferSeries {
    TotalCounter blocks;
    TotalCounter bytes;
    TotalCounter transfers;
  };
  struct GroupSeries {
    prometheus::Gauge* used;
    prometheus::Gauge* cached;
    TotalCounter hits;
  };
  // A manager with KV cache groups: one set per group, registered on first update.
  std::vector<GroupSeries> groups;
  prometheus::Family<prometheus::Gauge>* group_used = nullptr;
  prometheus::Family<prometheus::Gauge>* group_cached = nullptr;
  prometheus::Family<prometheus::Counter>* group_hits = nullptr;
  GroupSeries& group(const GroupMetrics& g) {
    if (group_used == nullptr) {
      group_used = &gauge("kvtier:kv_cache_group_used_blocks", "G1 pages of one KV cache group held by requests");
      group_cached = &gauge("kvtier:kv_cache_group_cached_blocks",
                            "G1 pages of one KV cache group kept for reuse that no request holds");
      group_hits = &counter("kvtier:prefix_cache_group_hit_blocks_total",
                            "Cached pages of one KV cache group requests took as prefix hits");
    }
    while (groups.size() <= g.index) {
      const prometheus::Labels labels{{"tier", "G1"}, {"group", std::to_string(groups.size())}, {"kind", g.kind}};
      groups.push_back(GroupSeries{.used = &group_used->Add(with(labels)),
                                   .cached = &group_cached->Add(with(labels)),
                                   .hits = TotalCounter(group_hits->Add(with(labels)))});
    }
    return groups[g.index];
  }
  // A tier's series appear with the tier (G2 only when an offload tier is attached).
  std::array<std::optional<TierSeries>, kTiers.size()> tiers{};
  std::optional<TransferSeries> g1_to_g2;
  std::optional<TransferSeries> g2_to_g1;
  std::optional<TransferSeries> g2_to_g3;
  std::optional<TransferSeries> g3_to_g2;
  std::optional<TransferSeries> g2_to_g4;
  std::optional<TransferSeries> g4_to_g2;

  prometheus::Labels with(prometheus::Labels labels) const {
    labels.insert(base.begin(), base.end());
    return labels;
  }
  prometheus::Family<prometheus::Gauge>& gauge(const std::string& name, const std::string& help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
  }
  prometheus::Family<prometheus::Counter>& counter(const std::string& name, const std::string& help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
  }

  TierSeries& tier(Tier t) {
    auto& slot = tiers[static_cast<std::size_t>(t)];
    if (!slot) {
      const prometheus::Labels label{{"tier", tier_label(t)}};
      slot.emplace(TierSeries{.usage_perc = &usage_perc.Add(with(label)),
                              .capacity = &capacity.Add(with(label)),
                              .used = &used.Add(with(label)),
                              .cached = &cached.Add(with(label)),
                              .hits = TotalCounter(hits.Add(with(label))),
                              .misses = TotalCounter(misses.Add(with(label))),
                              .stored = TotalCounter(stored.Add(with(label))),
                              .evicted = TotalCounter(evicted.Add(with(label))),
                              .checksum_failures = std::nullopt});
      if (t != Tier::G1) slot->checksum_failures.emplace(checksum_failures.Add(with(label)));
    }
    return *slot;
  }

  void advance_optional(std::optional<TotalCounter>& slot, const char* name, const char* help,
                        const std::optional<std::uint64_t>& total) {
    if (!total) return;
    if (!slot) slot.emplace(counter(name, help).Add(base));
    slot->advance_to(static_cast<double>(*total));
  }

  TransferSeries& transfer(std::optional<TransferSeries>& slot, const char* from, const char* to) {
    if (!slot) {
      const prometheus::Labels labels{{"from", from}, {"to", to}};
      slot.emplace(TransferSeries{.blocks = TotalCounter(transfer_blocks.Add(with(labels))),
                                  .bytes = TotalCounter(transfer_bytes.Add(with(labels))),
                                  .transfers = TotalCounter(transfers.Add(with(labels)))});
    }
    return *slot;
  }
};

PrometheusMetrics::PrometheusMetrics() : series_(std::make_unique<Series>(nullptr, prometheus::Labels{})) {}

PrometheusMetrics::PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry,
                                     std::map<std::string, std::string> labels)
    : series_(std::make_unique<Series>(std::move(registry), std::move(labels))) {}
PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::update(const KvMetrics& m) {
  Series& s = *series_;
  const auto total = [](std::uint64_t n) { return static_cast<double>(n); };
  for (const Tier t : kTiers) {
    const TierMetrics& tier = m.tier(t);
    if (!tier.present) continue;
    Series::TierSeries& out = s.tier(t);
    out.capacity->Set(total(tier.capacity_blocks));
    out.used->Set(total(tier.used_blocks));
    out.cached->Set(total(tier.cached_blocks));
    out.usage_perc->Set(tier.capacity_blocks == 0 ? 0.0 : total(tier.used_blocks) / total(tier.capacity_blocks));
    out.hits.advance_to(total(tier.hit_blocks));
    out.misses.advance_to(total(m.miss_blocks(t)));
    out.stored.advance_to(total(tier.stored_blocks));
    out.evicted.advance_to(total(tier.evicted_blocks));
    if (out.checksum_failures) out.checksum_failures->advance_to(total(tier.checksum_failures));
  }
  const auto copies = [&](std::optional<Series::TransferSeries>& slot, const char* from, const char* to,
                          const TransferMetrics& moved) {
    Series::TransferSeries& out = s.transfer(slot, from, to);
    out.blocks.advance_to(total(moved.blocks));
    out.bytes.advance_to(total(moved.bytes));
    out.transfers.advance_to(total(moved.transfers));
  };
  if (m.tier(Tier::G2).present) {
    copies(s.g1_to_g2, "G1", "G2", m.g1_to_g2);
    copies(s.g2_to_g1, "G2", "G1", m.g2_to_g1);
    s.failed_transfers.advance_to(total(m.failed_transfers));
  }
  if (m.tier(Tier::G3).present) {
    copies(s.g2_to_g3, "G2", "G3", m.g2_to_g3);
    copies(s.g3_to_g2, "G3", "G2", m.g3_to_g2);
  }
  if (m.tier(Tier::G4).present) {
    copies(s.g2_to_g4, "G2", "G4", m.g2_to_g4);
    copies(s.g4_to_g2, "G4", "G2", m.g4_to_g2);
  }
  s.queries.advance_to(total(m.query_blocks));
  s.advance_optional(s.operations, "kvtier:allocator_operations_total", "Calls into the G1 manager",
                     m.allocator_operations);
  s.advance_optional(s.pages_verified, "kvtier:kv_verified_pages_total",
                     "Reused pages checked against the K/V their tokens must hold", m.pages_verified);
  s.advance_optional(s.mismatches, "kvtier:kv_verify_mismatches_total",
                     "Reused pages whose bytes were not their tokens' K/V", m.verify_mismatches);
  for (const GroupMetrics& g : m.groups) {
    Series::GroupSeries& out = s.group(g);
    out.used->Set(total(g.used_blocks));
    out.cached->Set(total(g.cached_blocks));
    out.hits.advance_to(total(g.hit_blocks));
  }
  s.events_published.advance_to(total(m.events_published));
  s.events_dropped.advance_to(total(m.events_dropped));
}

void PrometheusMetrics::observe_step(double seconds) { series_->step_seconds.Observe(seconds); }

std::string PrometheusMetrics::text() const {
  return prometheus::TextSerializer().Serialize(series_->registry->Collect());
}

std::shared_ptr<prometheus::Registry> PrometheusMetrics::registry() const noexcept { return series_->registry; }

}  // namespace kvtier::metrics
