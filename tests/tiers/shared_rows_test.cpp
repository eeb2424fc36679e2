// G4 as a service of an engine's rows (what kvtier.vllm's KvtierSharedTier
// drives), against real redis-server processes: rows come back into another
// instance's rows; a damaged or forged value is never a loaded key; a stopped
// store answers no within its deadline and nothing hangs.
#include "kvtier/tiers/rows/shared_rows.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "support/engine_rows.hpp"
#include "support/redis_servers.hpp"

namespace kvtier::tiers::rows {
namespace {

using kvtier::testing::job;
using kvtier::testing::key;
using kvtier::testing::kRowBytes;
using kvtier::testing::RedisServers;
using kvtier::testing::Rows;
using kvtier::testing::run;

SharedRowsConfig config(const RedisServers& redis, std::string space = "model-a") {
  SharedRowsConfig c{.store = {.endpoints = {}, .key_namespace = "vllm"}, .namespace_text = std::move(space)};
  c.store.timeout = std::chrono::milliseconds(200);
  c.store.retry_after = std::chrono::milliseconds(200);
  for (const std::string& url : redis.urls()) c.store.endpoints.push_back(shared::parse_redis_url(url));
  return c;
}

std::unique_ptr<RowService> open(const SharedRowsConfig& c, const Rows& rows) {
  return std::make_unique<RowService>(open_shared_rows(c, rows.region()), rows.region(), false);
}

std::vector<std::vector<std::byte>> keys(std::vector<int> ns) {
  std::vector<std::vector<std::byte>> out;
  for (int n : ns) out.push_back(key(n));
  return out;
}

TEST(SharedRows, RowsComeBackIntoAnotherInstancesRows) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  Rows a_rows, b_rows;
  for (int n = 1; n <= 5; ++n) a_rows.fill(static_cast<std::size_t>(n), n);
  auto a = open(config(redis), a_rows);
  EXPECT_TRUE(run(*a, job(1, RowJobKind::Store, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5})).success);
  auto b = open(config(redis), b_rows);
  EXPECT_EQ(b->lookup_many(keys({1, 2, 3, 9})), (std::vector<bool>{true, true, true, false}));
  const RowJobResult load = run(*b, job(2, RowJobKind::Load, {3, 1, 9}, {10, 11, 12}));
  EXPECT_FALSE(load.success);
  EXPECT_EQ(load.loaded, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_TRUE(b_rows.holds(10, 3));
  EXPECT_TRUE(b_rows.holds(11, 1));
  // A load of keys no lookup asked about asks the store itself.
  EXPECT_TRUE(run(*b, job(3, RowJobKind::Load, {4, 5}, {12, 13})).success);
  EXPECT_TRUE(b_rows.holds(13, 5));
  // Another namespace (model) never meets these values.
  auto other = open(config(redis, "model-b"), b_rows);
  EXPECT_EQ(other->lookup_many(keys({1, 2})), (std::vector<bool>{false, false}));
}

TEST(SharedRows, ADamagedValueIsNeverLoaded) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  Rows rows;
  rows.fill(0, 1);
  rows.fill(1, 2);
  auto writer = open(config(redis), rows);
  EXPECT_TRUE(run(*writer, job(1, RowJobKind::Store, {1, 2}, {0, 1})).success);
  // Flip payload bytes of every value in place (same size).
  const std::string all = redis.cli(0, "--scan --pattern 'vllm:*'");
  std::size_t damaged = 0;
  for (std::size_t at = 0, end; at < all.size(); at = end + 1) {
    end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    const std::string k = all.substr(at, end - at);
    EXPECT_EQ(redis.cli(0, "SETRANGE '" + k + "' 5000 'XYZ'"), std::to_string(4096 + kRowBytes));
    ++damaged;
  }
  EXPECT_EQ(damaged, 2U);
  auto reader = open(config(redis), rows);
  const RowJobResult load = run(*reader, job(2, RowJobKind::Load, {1, 2}, {5, 6}));
  EXPECT_FALSE(load.success);
  EXPECT_TRUE(load.loaded.empty());
  EXPECT_EQ(reader->lookup_many(keys({1, 2})), (std::vector<bool>{false, false}));  // deleted as they failed
}

TEST(SharedRows, AStoppedStoreAnswersNoWithinItsDeadlineAndNothingHangs) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  Rows rows;
  rows.fill(0, 1);
  auto service = open(config(redis), rows);
  EXPECT_TRUE(run(*service, job(1, RowJobKind::Store, {1}, {0})).success);
  ASSERT_TRUE(redis.signal(0, "STOP"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(service->lookup_many(keys({1, 2})), (std::vector<bool>{false, false}));
  EXPECT_FALSE(run(*service, job(2, RowJobKind::Store, {2}, {0})).success);
  const RowJobResult load = run(*service, job(3, RowJobKind::Load, {1}, {3}));
  EXPECT_FALSE(load.success);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 3.0);  // three calls of 200 ms deadlines, not a hang
  const RowTierCounters counters = service->counters();
  EXPECT_GT(counters.deadline_misses, 0U);
  EXPECT_TRUE(counters.breaker_open);
  ASSERT_TRUE(redis.signal(0, "CONT"));
  service->shutdown();
}

}  // namespace
}  // namespace kvtier::tiers::rows
