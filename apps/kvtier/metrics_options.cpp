#include "metrics_options.hpp"

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "option_checks.hpp"
#if KVTIER_WITH_PROMETHEUS
#include "kvtier/metrics/metrics_endpoint.hpp"
#include "kvtier/metrics/prometheus_metrics.hpp"
#endif

namespace kvtier::cli {

void add_metrics_options(CLI::App& command, MetricsOptions& o) {
  command
      .add_option("--metrics-port", o.port,
                  "serve Prometheus metrics at http://HOST:PORT/metrics during the run (0: a free port)")
      ->check(CLI::Range(0, 65535));
  command.add_option("--metrics-host", o.host, "the address --metrics-port listens on")
      ->check(non_empty())
      ->capture_default_str();
  command.add_option("--metrics-file", o.file, "write the Prometheus exposition here at the end")->check(non_empty());
  command.add_option("--metrics-linger", o.linger_s, "seconds /metrics stays up after the run")
      ->check(linger_seconds())
      ->capture_default_str();
}

#if KVTIER_WITH_PROMETHEUS
namespace {

class PrometheusOutput final : public MetricsOutput {
 public:
  PrometheusOutput(const MetricsOptions& o, std::size_t instances) : options_(o) {
    if (instances <= 1) {
      metrics_.push_back(std::make_unique<metrics::PrometheusMetrics>());
    } else {
      std::shared_ptr<prometheus::Registry> shared;  // the first instance's, shared by the others
      for (std::size_t i = 0; i < instances; ++i) {
        metrics_.push_back(std::make_unique<metrics::PrometheusMetrics>(
            shared, std::map<std::string, std::string>{{"engine", std::to_string(i)}}));
        shared = metrics_.back()->registry();
      }
    }
    if (o.port) {
      endpoint_ = std::make_unique<metrics::MetricsEndpoint>(*metrics_.front(), o.host, *o.port);
      std::cerr << "kvtier: metrics on " << endpoint_->url() << std::endl;
    }
  }
  void update(const metrics::KvMetrics& m, std::optional<double> step_seconds, std::size_t instance) override {
    metrics::PrometheusMetrics& out = *metrics_.at(instance);
    out.update(m);
    if (step_seconds) out.observe_step(*step_seconds);
  }
  void finish() override {
    if (!options_.file.empty()) {
      std::ofstream out(options_.file);
      out << metrics_.front()->text();  // the shared registry: every instance's series
      if (!out.flush()) throw ConfigError("cannot write " + options_.file);
    }
    if (endpoint_ && options_.linger_s > 0.0)
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.linger_s));
  }

 private:
  MetricsOptions options_;
  std::vector<std::unique_ptr<metrics::PrometheusMetrics>> metrics_;  // one per instance, one registry
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;                // after metrics_: serves their registry
};

}  // namespace

std::unique_ptr<MetricsOutput> open_metrics(const MetricsOptions& o, std::size_t instances) {
  if (!o.port && o.file.empty()) return nullptr;
  return std::make_unique<PrometheusOutput>(o, instances);
}
#else
std::unique_ptr<MetricsOutput> open_metrics(const MetricsOptions& o, std::size_t) {
  if (!o.port && o.file.empty()) return nullptr;
  throw ConfigError(
      "this kvtier was built without prometheus-cpp: no --metrics-port/--metrics-file (scripts/install-deps.sh)");
}
#endif

}  // namespace kvtier::cli
