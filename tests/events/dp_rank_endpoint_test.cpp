// vLLM's endpoint per data-parallel rank: tcp ports offset by the rank, ipc
// and inproc names suffixed; what cannot be offset is refused.
#include "kvtier/events/dp_rank_endpoint.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::events {
namespace {

TEST(DpRankEndpoint, RankZeroKeepsTheEndpointAndOthersFollowVllm) {
  EXPECT_EQ(dp_rank_endpoint("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(dp_rank_endpoint("tcp://*:5557", 3), "tcp://*:5560");
  EXPECT_EQ(dp_rank_endpoint("tcp://127.0.0.1:5557", 1), "tcp://127.0.0.1:5558");
  EXPECT_EQ(dp_rank_endpoint("tcp://[::1]:6000", 2), "tcp://[::1]:6002");
  EXPECT_EQ(dp_rank_endpoint("ipc:///tmp/kv", 2), "ipc:///tmp/kv_dp2");
  EXPECT_EQ(dp_rank_endpoint("inproc://cache", 1), "inproc://cache_dp1");
  EXPECT_EQ(dp_rank_endpoint("whatever", 0), "whatever");  // rank 0 is the endpoint as given, as in vLLM
}

TEST(DpRankEndpoint, WhatCannotBeOffsetIsRefused) {
  EXPECT_THROW(dp_rank_endpoint("tcp://*:65535", 1), ConfigError);
  EXPECT_THROW(dp_rank_endpoint("tcp://host", 1), ConfigError);
  EXPECT_THROW(dp_rank_endpoint("tcp://host:", 1), ConfigError);
  EXPECT_THROW(dp_rank_endpoint("tcp://host:55x", 1), ConfigError);
  EXPECT_THROW(dp_rank_endpoint("tcp://host:99999", 1), ConfigError);
  EXPECT_THROW(dp_rank_endpoint("udp://host:5557", 1), ConfigError);
}

}  // namespace
}  // namespace kvtier::events
