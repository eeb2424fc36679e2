#pragma once
// `--metrics-port`, `--metrics-host`, `--metrics-file` and `--metrics-linger`
// of `kvtier replay`: Prometheus metrics during the run and at its end, when
// kvtier was built with prometheus-cpp.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "kvtier/metrics/kv_metrics.hpp"

namespace kvtier::cli {

struct MetricsOptions {
  std::optional<int> port;  // serve /metrics while the replay runs (0: any free port)
  std::string host = "127.0.0.1";
  std::string file;       // the exposition at the end
  double linger_s = 0.0;  // keep serving this long after the run
};

void add_metrics_options(CLI::App& command, MetricsOptions& options);

/// Where the metrics go: updated after every step, written and held at the end.
class MetricsOutput {
 public:
  virtual ~MetricsOutput() = default;
  /// `instance`: which of the instances it was opened for (0 .. instances - 1).
  virtual void update(const metrics::KvMetrics& metrics, std::optional<double> step_seconds,
                      std::size_t instance = 0) = 0;
  /// Writes --metrics-file, then keeps serving for --metrics-linger.
  virtual void finish() = 0;
};

/// nullptr when neither a port nor a file was asked for. ConfigError when the
/// port cannot be bound or kvtier was built without prometheus-cpp. A served
/// endpoint is announced on stderr ("kvtier: metrics on http://..."). With
/// several instances every series carries engine="i" (vLLM's label for its
/// data-parallel engines), all on the one endpoint and file.
std::unique_ptr<MetricsOutput> open_metrics(const MetricsOptions& options, std::size_t instances = 1);

}  // namespace kvtier::cli
