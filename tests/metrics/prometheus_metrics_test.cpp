// KvMetrics as Prometheus series: names and labels, counters fed with totals
// (never counted twice, never falling), G2 series only with a G2 tier, and
// the HTTP endpoint serving them on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "kvtier/core/errors.hpp"
#include "kvtier/metrics/metrics_endpoint.hpp"
#include "kvtier/metrics/prometheus_metrics.hpp"

namespace kvtier::metrics {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

KvMetrics with_g2() {
  KvMetrics m;
  m.tier(Tier::G1) = TierMetrics{.present = true,
                                 .capacity_blocks = 100,
                                 .used_blocks = 25,
                                 .cached_blocks = 40,
                                 .hit_blocks = 30,
                                 .stored_blocks = 70,
                                 .evicted_blocks = 9};
  m.tier(Tier::G2) = TierMetrics{.present = true,
                                 .capacity_blocks = 50,
                                 .used_blocks = 10,
                                 .cached_blocks = 10,
                                 .hit_blocks = 5,
                                 .stored_blocks = 12,
                                 .evicted_blocks = 2,
                                 .checksum_failures = 1};
  m.query_blocks = 80;
  m.g1_to_g2 = TransferMetrics{.transfers = 3, .blocks = 12, .bytes = 12 * 4096};
  m.g2_to_g1 = TransferMetrics{.transfers = 1, .blocks = 5, .bytes = 5 * 4096};
  m.failed_transfers = 1;
  m.allocator_operations = 400;
  m.pages_verified = 35;
  m.events_published = 90;
  m.events_dropped = 3;
  return m;
}

TEST(PrometheusMetrics, EverySeriesCarriesItsTierAndValue) {
  PrometheusMetrics prometheus;
  prometheus.update(with_g2());
  const std::string text = prometheus.text();
  EXPECT_TRUE(has_line(text, "# TYPE kvtier:kv_cache_usage_perc gauge")) << text;
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_usage_perc{tier=\"G1\"} 0.25")) << text;
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_usage_perc{tier=\"G2\"} 0.2"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_capacity_blocks{tier=\"G2\"} 50"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_cached_blocks{tier=\"G1\"} 40"));
  EXPECT_TRUE(has_line(text, "# TYPE kvtier:prefix_cache_hit_blocks_total counter"));
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_hit_blocks_total{tier=\"G1\"} 30"));
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_miss_blocks_total{tier=\"G1\"} 50"));
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_miss_blocks_total{tier=\"G2\"} 45"));
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_query_blocks_total 80"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_evicted_blocks_total{tier=\"G1\"} 9"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_checksum_failures_total{tier=\"G2\"} 1"));
  EXPECT_EQ(text.find("kvtier:kv_checksum_failures_total{tier=\"G1\"}"), std::string::npos) << "G1 has no checksums";
  EXPECT_TRUE(has_line(text, "kvtier:kv_transfer_bytes_total{from=\"G1\",to=\"G2\"} 49152"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_transfer_blocks_total{from=\"G2\",to=\"G1\"} 5"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_transfers_total{from=\"G1\",to=\"G2\"} 3"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_transfer_failures_total 1"));
  EXPECT_TRUE(has_line(text, "kvtier:allocator_operations_total 400"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_events_published_total 90"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_events_dropped_total 3"));
}

/// Several instances: one registry, each instance's series under its own
/// engine label, its counters its own.
TEST(PrometheusMetrics, InstancesShareARegistryUnderTheirEngineLabels) {
  PrometheusMetrics first(nullptr, {{"engine", "0"}});
  PrometheusMetrics second(first.registry(), {{"engine", "1"}});
  KvMetrics a = with_g2();
  KvMetrics b = with_g2();
  b.query_blocks = 7;
  b.tier(Tier::G1).hit_blocks = 2;
  first.update(a);
  second.update(b);
  second.update(b);  // totals, not increments
  second.observe_step(0.5);
  EXPECT_EQ(first.text(), second.text());  // one registry
  const std::string text = first.text();
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_query_blocks_total{engine=\"0\"} 80")) << text;
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_query_blocks_total{engine=\"1\"} 7")) << text;
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_hit_blocks_total{engine=\"0\",tier=\"G1\"} 30"));
  EXPECT_TRUE(has_line(text, "kvtier:prefix_cache_hit_blocks_total{engine=\"1\",tier=\"G1\"} 2"));
  EXPECT_TRUE(has_line(text, "kvtier:kv_transfer_bytes_total{engine=\"1\",from=\"G1\",to=\"G2\"} 49152"));
  EXPECT_TRUE(has_line(text, "kvtier:scheduler_step_duration_seconds_count{engine=\"1\"} 1"));
  EXPECT_TRUE(has_line(text, "kvtier:scheduler_step_duration_seconds_count{engine=\"0\"} 0"));
  EXPECT_EQ(text.find("kvtier:prefix_cache_query_blocks_total 80"), std::string::npos) << "every series is labelled";
}

TEST(PrometheusMetrics, CountersTakeTotalsOnceAndNeverFall) {
  PrometheusMetrics prometheus;
  KvMetrics m = with_g2();
  prometheus.update(m);
  prometheus.update(m);  // the same totals again: nothing more counted
  EXPECT_TRUE(has_line(prometheus.text(), "kvtier:allocator_operations_total 400"));
  m.allocator_operations = 450;
  m.tier(Tier::G1).used_blocks = 10;
  prometheus.update(m);
  EXPECT_TRUE(has_line(prometheus.text(), "kvtier:allocator_operations_total 450"));
  EXPECT_TRUE(has_line(prometheus.text(), "kvtier:kv_cache_used_blocks{tier=\"G1\"} 10")) << "gauges follow";
  m.allocator_operations = 10;
  prometheus.update(m);
  EXPECT_TRUE(has_line(prometheus.text(), "kvtier:allocator_operations_total 450"));
}

TEST(PrometheusMetrics, G2SeriesAppearOnlyWithAG2Tier) {
  PrometheusMetrics prometheus;
  KvMetrics m = with_g2();
  m.tier(Tier::G2).present = false;
  prometheus.update(m);
  const std::string text = prometheus.text();
  EXPECT_EQ(text.find("tier=\"G2\""), std::string::npos) << text;
  EXPECT_EQ(text.find("kvtier:kv_transfer_bytes_total{"), std::string::npos);
  EXPECT_EQ(text.find("kvtier:kv_verify_mismatches_total"), std::string::npos) << "counted by no one here";
  EXPECT_TRUE(has_line(text, "kvtier:kv_cache_capacity_blocks{tier=\"G1\"} 100"));
}

TEST(PrometheusMetrics, StepTimesFillTheHistogram) {
  PrometheusMetrics prometheus;
  prometheus.observe_step(0.002);
  prometheus.observe_step(0.2);
  const std::string text = prometheus.text();
  EXPECT_TRUE(has_line(text, "# TYPE kvtier:scheduler_step_duration_seconds histogram")) << text;
  EXPECT_TRUE(has_line(text, "kvtier:scheduler_step_duration_seconds_count 2"));
  EXPECT_TRUE(has_line(text, "kvtier:scheduler_step_duration_seconds_bucket{le=\"0.005\"} 1"));
  EXPECT_TRUE(has_line(text, "kvtier:scheduler_step_duration_seconds_bucket{le=\"+Inf\"} 2"));
}

/// GET http://127.0.0.1:port/metrics with a plain socket: the response.
std::string scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
  close(fd);
  return response;
}

TEST(MetricsEndpoint, ServesTheSeriesOnLoopbackAndFollowsUpdates) {
  PrometheusMetrics prometheus;
  MetricsEndpoint endpoint(prometheus, "127.0.0.1", 0);
  ASSERT_GT(endpoint.port(), 0);
  EXPECT_EQ(endpoint.url(), "http://127.0.0.1:" + std::to_string(endpoint.port()) + "/metrics");
  KvMetrics m = with_g2();
  prometheus.update(m);
  std::string page = scrape(endpoint.port());
  EXPECT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("\nkvtier:allocator_operations_total 400\n"), std::string::npos) << page;
  m.allocator_operations = 401;
  prometheus.update(m);
  page = scrape(endpoint.port());
  EXPECT_NE(page.find("\nkvtier:allocator_operations_total 401\n"), std::string::npos);
}

TEST(MetricsEndpoint, APortInUseOrOutOfRangeIsAClearError) {
  PrometheusMetrics prometheus;
  MetricsEndpoint first(prometheus, "127.0.0.1", 0);
  try {
    MetricsEndpoint second(prometheus, "127.0.0.1", first.port());
    FAIL() << "a second endpoint bound the same port";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot serve metrics on 127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << error.what();
    // Issue 31, L12: civetweb said only "null context when constructing CivetServer".
    EXPECT_NE(std::string(error.what()).find("Address already in use"), std::string::npos) << error.what();
  }
  EXPECT_THROW(MetricsEndpoint(prometheus, "127.0.0.1", 70000), ConfigError);
  EXPECT_THROW(MetricsEndpoint(prometheus, "127.0.0.1", -1), ConfigError);
}

// Issue 31, L11: --metrics-port added about 2 s to every run: civetweb's
// listening thread saw the stop only when its 2 s poll ended.
TEST(MetricsEndpoint, StopsWithoutWaitingForTheServersPoll) {
  PrometheusMetrics prometheus;
  auto endpoint = std::make_unique<MetricsEndpoint>(prometheus, "127.0.0.1", 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its threads are in their poll
  const auto start = std::chrono::steady_clock::now();
  endpoint.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
}

TEST(PrometheusMetrics, AManagerWithGroupsHasSeriesPerGroup) {
  KvMetrics m;
  m.tier(Tier::G1) = TierMetrics{.present = true, .capacity_blocks = 21, .used_blocks = 10, .cached_blocks = 2};
  m.groups = {
      GroupMetrics{.index = 0, .kind = "full_attention", .used_blocks = 5, .cached_blocks = 1, .hit_blocks = 3},
      GroupMetrics{.index = 1, .kind = "sliding_window", .used_blocks = 5, .cached_blocks = 1, .hit_blocks = 2}};
  PrometheusMetrics prometheus;
  prometheus.update(m);
  m.groups[1].hit_blocks = 6;
  prometheus.update(m);
  const std::string text = prometheus.text();
  EXPECT_TRUE(has_line(text, R"(kvtier:kv_cache_group_used_blocks{group="1",kind="sliding_window",tier="G1"} 5)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(kvtier:kv_cache_group_cached_blocks{group="0",kind="full_attention",tier="G1"} 1)"));
  EXPECT_TRUE(
      has_line(text, R"(kvtier:prefix_cache_group_hit_blocks_total{group="1",kind="sliding_window",tier="G1"} 6)"));
  EXPECT_TRUE(
      has_line(text, R"(kvtier:prefix_cache_group_hit_blocks_total{group="0",kind="full_attention",tier="G1"} 3)"));
  // A manager without groups has none of them.
  PrometheusMetrics plain;
  m.groups.clear();
  plain.update(m);
  EXPECT_EQ(plain.text().find("group"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::metrics
