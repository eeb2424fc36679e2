#include "kvtier/metrics/metrics_endpoint.hpp"

#include <netdb.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "kvtier/core/errors.hpp"

namespace kvtier::metrics {
namespace {

/// A socket to `host`:`port` (connected or bound), -1 with errno set when none could be made.
int socket_to(const std::string& host, int port, bool bind_it) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = bind_it ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    errno = EADDRNOTAVAIL;
    return -1;
  }
  int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd >= 0) {
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as civetweb binds
    const int done =
        bind_it ? ::bind(fd, found->ai_addr, found->ai_addrlen) : ::connect(fd, found->ai_addr, found->ai_addrlen);
    if (done != 0) {
      const int error = errno;
      ::close(fd);
      fd = -1;
      errno = error;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const PrometheusMetrics& metrics, const std::string& host, int port) : host_(host) {
  if (port < 0 || port > 65535) throw ConfigError("metrics port " + std::to_string(port) + " is outside 0-65535");
  const std::string address = host + ":" + std::to_string(port);
  // civetweb says only "null context when constructing CivetServer": find out why first.
  if (const int probe = socket_to(host, port, true); probe >= 0) {
    ::close(probe);
  } else {
    throw ConfigError("cannot serve metrics on " + address + ": " + std::strerror(errno));
  }
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

MetricsEndpoint::~MetricsEndpoint() {
  // civetweb's listening thread notices it should stop only when its poll
  // ends (every 2 s): a connection made while it stops wakes it at once.
  std::atomic<bool> stopped{false};
  std::thread waker;
  try {
    const std::string wake_host = host_ == "0.0.0.0" || host_ == "::" ? "127.0.0.1" : host_;
    waker = std::thread([&stopped, wake_host, port = port_] {
      while (!stopped.load()) {
        if (const int fd = socket_to(wake_host, port, false); fd >= 0) ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  } catch (...) {  // no thread: the stop takes civetweb's own time
  }
  exposer_.reset();
  stopped = true;
  if (waker.joinable()) waker.join();
}

std::string MetricsEndpoint::url() const { return "http://" + host_ + ":" + std::to_string(port_) + "/metrics"; }

}  // namespace kvtier::metrics
