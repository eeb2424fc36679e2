#pragma once
// Where data-parallel rank R publishes its KV events, by vLLM's convention
// (ZmqEventPublisher.offset_endpoint_port): rank 0 the endpoint as given;
// rank R a tcp endpoint's port plus R, an ipc:// or inproc:// endpoint with
// "_dp<R>" appended. A router for a DP deployment subscribes to each.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier::events {

/// ConfigError for a tcp endpoint without a numeric port, a port past 65535
/// once offset, or another transport (at ranks above 0).
std::string dp_rank_endpoint(std::string_view endpoint, std::uint32_t rank);

}  // namespace kvtier::events
