#include "kvtier/metrics/metrics_endpoint.hpp"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::metrics {

MetricsEndpoint::MetricsEndpoint(const PrometheusMetrics& metrics, const std::string& host, int port) : host_(host) {
  if (port < 0 || port > 65535) throw ConfigError("metrics port " + std::to_string(port) + " is outside 0-65535");
  const std::string address = host + ":" + std::to_string(port);
  try {
    // One serving thread: a scrape is one small page.
    exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& error) {
    throw ConfigError("cannot serve metrics on " + address + ": " + error.what());
  }
  exposer_->RegisterCollectable(metrics.registry());
  const auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) throw ConfigError("cannot serve metrics on " + address + ": no listening port");
  port_ = ports.front();
}

MetricsEndpoint::~MetricsEndpoint() = default;

std::string MetricsEndpoint::url() const { return "http://" + host_ + ":" + std::to_string(port_) + "/metrics"; }

}  // namespace kvtier::metrics
