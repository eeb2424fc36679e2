#pragma once
// Serves a PrometheusMetrics registry at http://HOST:PORT/metrics through
// prometheus-cpp's own HTTP exposer (civetweb), on a thread of its own, for as
// long as the endpoint lives.
#include <memory>
#include <string>

#include "kvtier/metrics/prometheus_metrics.hpp"

namespace prometheus {
class Exposer;
}

namespace kvtier::metrics {

class MetricsEndpoint {
 public:
  /// Listens on `host`:`port` (port 0: a free port; port() says which).
  /// ConfigError when the address cannot be bound (in use, not local).
  MetricsEndpoint(const PrometheusMetrics& metrics, const std::string& host, int port);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const noexcept { return port_; }
  /// "http://127.0.0.1:PORT/metrics"
  std::string url() const;

 private:
  std::string host_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace kvtier::metrics
