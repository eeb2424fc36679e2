#pragma once
// KvMetrics as Prometheus series (prometheus-cpp's registry, counters, gauges
// and a histogram), named in the style of vLLM's (`kvtier:kv_cache_usage_perc
// {tier="G2"}`; docs/metrics.md lists them). update() sets the gauges and
// advances each counter to the total it is given, so a front door hands over
// cumulative numbers and never counts twice. One thread updates; scrapes
// (text(), the MetricsEndpoint) may run on others.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kvtier/metrics/kv_metrics.hpp"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace kvtier::metrics {

class PrometheusMetrics {
 public:
  PrometheusMetrics();
  /// Series in `registry` (shared with other PrometheusMetrics: one endpoint
  /// serves them all), each with `labels` besides its own, e.g. {engine: "1"}
  /// for one of several instances, as vLLM labels its data-parallel engines.
  PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry, std::map<std::string, std::string> labels);
  ~PrometheusMetrics();
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  /// Gauges take the values given; counters move up to the totals given (a
  /// total below the last one leaves its counter as it is: counters never fall).
  void update(const KvMetrics& metrics);
  /// One scheduler step's wall time (the replay's forward-pass loop).
  void observe_step(double seconds);
  /// The text exposition format (version 0.0.4) of every series.
  std::string text() const;
  /// What an HTTP exposer serves.
  std::shared_ptr<prometheus::Registry> registry() const noexcept;

 private:
  struct Series;
  std::unique_ptr<Series> series_;
};

}  // namespace kvtier::metrics
