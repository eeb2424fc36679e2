#include "metrics_options.hpp"

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

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
      ->check(non_negative_seconds())
      ->capture_default_str();
}

#if KVTIER_WITH_PROMETHEUS
namespace {

class PrometheusOutput final : public MetricsOutput {
 public:
  explicit PrometheusOutput(const MetricsOptions& o) : options_(o) {
    if (o.port) {
      endpoint_ = std::make_unique<metrics::MetricsEndpoint>(metrics_, o.host, *o.port);
      std::cerr << "kvtier: metrics on " << endpoint_->url() << std::endl;
    }
  }
  void update(const metrics::KvMetrics& m, std::optional<double> step_seconds) override {
    metrics_.update(m);
    if (step_seconds) metrics_.observe_step(*step_seconds);
  }
  void finish() override {
    if (!options_.file.empty()) {
      std::ofstream out(options_.file);
      out << metrics_.text();
      if (!out.flush()) throw ConfigError("cannot write " + options_.file);
    }
    if (endpoint_ && options_.linger_s > 0.0)
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.linger_s));
  }

 private:
  MetricsOptions options_;
  metrics::PrometheusMetrics metrics_;
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;  // after metrics_: serves its registry
};

}  // namespace

std::unique_ptr<MetricsOutput> open_metrics(const MetricsOptions& o) {
  if (!o.port && o.file.empty()) return nullptr;
  return std::make_unique<PrometheusOutput>(o);
}
#else
std::unique_ptr<MetricsOutput> open_metrics(const MetricsOptions& o) {
  if (!o.port && o.file.empty()) return nullptr;
  throw ConfigError(
      "this kvtier was built without prometheus-cpp: no --metrics-port/--metrics-file (scripts/install-deps.sh)");
}
#endif

}  // namespace kvtier::cli
