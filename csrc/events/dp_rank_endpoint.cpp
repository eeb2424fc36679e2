#include "kvtier/events/dp_rank_endpoint.hpp"

#include <charconv>

#include "kvtier/core/errors.hpp"

namespace kvtier::events {

std::string dp_rank_endpoint(std::string_view endpoint, std::uint32_t rank) {
  const std::string given(endpoint);
  if (rank == 0) return given;
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) {
    return given + "_dp" + std::to_string(rank);
  }
  if (!endpoint.starts_with("tcp://")) {
    throw ConfigError("KV events of data-parallel rank " + std::to_string(rank) + ": '" + given +
                      "' is neither tcp://, ipc:// nor inproc://");
  }
  const std::size_t colon = endpoint.rfind(':');
  const std::string_view port_text = endpoint.substr(colon + 1);
  std::uint32_t port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (colon < 6 || port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    throw ConfigError("KV events endpoint '" + given + "' has no port to offset for data-parallel rank " +
                      std::to_string(rank));
  }
  if (port + std::uint64_t{rank} > 65535) {
    throw ConfigError("KV events endpoint '" + given + "': port " + std::to_string(port) + " + rank " +
                      std::to_string(rank) + " is past 65535");
  }
  return given.substr(0, colon + 1) + std::to_string(port + rank);
}

}  // namespace kvtier::events
