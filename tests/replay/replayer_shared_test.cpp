// The replay over a G4 shared tier on real redis-server processes: a prefix
// one session published is a G4 hit, byte-checked, in another (two
// processes sharing one store); four instances in one process, routed round
// robin on the shared Mooncake trace, hit G4 where alone they miss; a
// cluster shard killed with SIGKILL in the middle of a replay costs hits,
// never a byte or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>

#include <hiredis/hiredis.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/shared/redis_node.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "support/record_forgery.hpp"
#include "support/redis_servers.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::replay {
namespace {

using kvtier::testing::RedisServers;

ReplayConfig config(g1::G1Backend backend, std::uint32_t capacity, std::uint32_t block_size, std::uint32_t host_blocks,
                    const std::vector<std::string>& urls, const std::string& space) {
  ReplayConfig c;
  c.session.manager = g1::G1ManagerConfig{.capacity = capacity, .block_size = block_size, .backend = backend};
  c.session.geometry = KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16};
  c.session.host_blocks = host_blocks;
  if (!urls.empty()) c.session.shared = session::SharedTierSettings{.urls = urls, .key_namespace = space};
  c.verify = VerifyMode::Full;
  return c;
}

TraceRequest request(double at, std::vector<std::uint64_t> ids) {
  return TraceRequest{
      .timestamp_ms = at, .input_length = ids.size() * kTraceBlockTokens, .output_length = 0, .hash_ids = ids};
}

TEST(ReplayerShared, APrefixOneSessionPublishedIsAG4HitInTheNextWithItsBytes) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    const std::string space = std::string("two-sessions-") + g1::backend_name(backend);
    ReplayConfig c = config(backend, 24, 64, 8, redis.urls(), space);  // 24 G1 pages, 8 G2 pages
    c.max_running = 1;
    // 1, 2 and 3 fill G1; 4 pushes 1 to G2, which publishes it.
    const auto first = replay(runtime, c, {request(0, {1}), request(1, {2}), request(2, {3}), request(3, {4})});
    EXPECT_GE(first.g4_blocks_published, 8U) << g1::backend_name(backend);
    EXPECT_EQ(first.g4_hit_blocks, 0U);
    // A new session (another engine): cold G1 and G2, block 1's 8 pages from G4.
    const auto second = replay(runtime, c, {request(0, {1, 5})});
    EXPECT_EQ(second.g4_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_EQ(second.g1_hit_blocks + second.g2_hit_blocks, 0U);
    EXPECT_EQ(second.g4_blocks_fetched, 8U);
    EXPECT_EQ(second.g4_lookups, 1U);
    EXPECT_GE(second.pages_verified, 8U);
    EXPECT_EQ(second.mismatches, 0U);
    EXPECT_EQ(second.g4_checksum_failures + second.g4_errors, 0U);
  }
}

TEST(ReplayerShared, BesideG3TheNearestTierServesAndG4ServesAnInstanceWithoutTheDisk) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  kvtier::testing::ScratchDirectory scratch("kvtier-replay-g3-g4");
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    const std::string space = std::string("beside-g3-") + g1::backend_name(backend);
    ReplayConfig c = config(backend, 24, 64, 8, redis.urls(), space);
    c.max_running = 1;
    c.session.disk = session::DiskTierSettings{.path = scratch.path() / space, .blocks = 64};
    // 1, 2 and 3 fill G1; 4 pushes 1 to G2 (published to G4), 6 pushes 2 there and 1 on to G3.
    const auto first =
        replay(runtime, c, {request(0, {1}), request(1, {2}), request(2, {3}), request(3, {4}), request(4, {6})});
    EXPECT_GE(first.g3_blocks_written, 8U) << g1::backend_name(backend);
    EXPECT_GE(first.g4_blocks_published, 16U);
    // Another session on the same disk: block 1 from G3, the nearer tier; no G4 round trip is needed.
    const auto same_disk = replay(runtime, c, {request(0, {1, 5})});
    EXPECT_EQ(same_disk.g3_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_EQ(same_disk.g4_hit_blocks, 0U);
    EXPECT_EQ(same_disk.mismatches, 0U);
    // An instance whose disk is empty: block 1 from G4.
    c.session.disk->path = scratch.path() / (space + "-other");
    const auto other_disk = replay(runtime, c, {request(0, {1, 5})});
    EXPECT_EQ(other_disk.g4_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_EQ(other_disk.g3_hit_blocks, 0U);
    EXPECT_GE(other_disk.pages_verified, 8U);
    EXPECT_EQ(other_disk.mismatches, 0U);
  }
}

/// Four instances on requests of the Mooncake trace without a shared tier:
/// what G4 is measured against; its wall time in `seconds`.
ReplayReport four_instances_alone(memory::Runtime& runtime, const std::vector<TraceRequest>& trace,
                                  double* seconds = nullptr) {
  ReplayConfig alone = config(g1::G1Backend::Native, 1500, 128, 500, {}, "");
  alone.instances = 4;
  const auto start = std::chrono::steady_clock::now();
  ReplayReport report = combine(replay_instances(runtime, alone, trace));
  if (seconds != nullptr) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

TEST(ReplayerShared, FourInstancesRoundRobinHitG4WhereAloneTheyMiss) {
  RedisServers redis(1, "2gb");
  KVTIER_REQUIRE_REDIS(redis);
  memory::HostRuntime runtime;
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 200);
  const auto without = four_instances_alone(runtime, trace);
  ReplayConfig shared = config(g1::G1Backend::Native, 1500, 128, 500, redis.urls(), "four");
  shared.instances = 4;
  const auto reports = replay_instances(runtime, shared, trace);
  ASSERT_EQ(reports.size(), 4U);
  const ReplayReport with = combine(reports);
  EXPECT_EQ(with.requests, trace.size());
  EXPECT_EQ(with.prompt_blocks, without.prompt_blocks);
  EXPECT_GT(with.g4_hit_blocks, 0U);
  EXPECT_GT(with.hit_rate(), without.hit_rate());
  std::size_t instances_hitting = 0;
  for (const ReplayReport& r : reports) instances_hitting += r.g4_hit_blocks > 0 ? 1 : 0;
  EXPECT_GE(instances_hitting, 2U);  // blocks cross instances
  EXPECT_EQ(with.mismatches, 0U);
  EXPECT_GE(with.pages_verified, with.g4_hit_blocks);
  EXPECT_EQ(with.g4_checksum_failures + with.g4_errors, 0U);
}

// Issue 35: what G4 is offered and when. Lazy publishing waits for G2's
// eviction (a block still in G2 at the end was never published); second-offer
// admission publishes a block only once it came back or was a G2 hit. Neither
// serves a byte wrong.
TEST(ReplayerShared, LazyAndSecondOfferPublishingStoreLessAndServeOnlyVerifiedBytes) {
  RedisServers redis(1, "2gb");
  KVTIER_REQUIRE_REDIS(redis);
  memory::HostRuntime runtime;
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 200);
  const auto run = [&](const std::string& space, bool eager, offload::TierAdmission admission) {
    ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, redis.urls(), space);
    c.session.shared->publish_on_landing = eager;
    c.session.g4_admission = admission;
    c.instances = 2;
    return combine(replay_instances(runtime, c, trace));
  };
  const ReplayReport eager = run("eager", true, offload::TierAdmission::All);
  const ReplayReport lazy = run("lazy", false, offload::TierAdmission::All);
  const ReplayReport picky = run("picky", true, offload::TierAdmission::SecondOffer);
  EXPECT_LT(lazy.g4_blocks_published, eager.g4_blocks_published);
  EXPECT_LT(picky.g4_blocks_published, eager.g4_blocks_published);
  EXPECT_GT(picky.g4_admission_declined, 0U);
  EXPECT_EQ(eager.g4_admission_declined + lazy.g4_admission_declined, 0U);
  for (const ReplayReport* r : {&eager, &lazy, &picky}) {
    EXPECT_EQ(r->requests, trace.size());
    EXPECT_EQ(r->mismatches, 0U);
    EXPECT_GE(r->pages_verified, r->g4_hit_blocks);
    EXPECT_EQ(r->g4_checksum_failures + r->g4_errors, 0U);
  }
  EXPECT_GT(eager.g4_hit_blocks, 0U);
}

TEST(ReplayerShared, AShardKilledMidReplayCostsHitsNeverBytes) {
  RedisServers redis(3, "1gb");
  KVTIER_REQUIRE_REDIS(redis);
  memory::HostRuntime runtime;
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 160);
  ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, redis.urls(), "killed");
  c.instances = 2;
  bool killed = false;
  c.progress = [&](std::size_t done, std::size_t total) {
    if (!killed && done >= total / 2) killed = redis.kill(2);
  };
  const ReplayReport report = combine(replay_instances(runtime, c, trace));
  EXPECT_TRUE(killed);
  EXPECT_EQ(report.requests, trace.size());
  EXPECT_GT(report.g4_hit_blocks, 0U);
  EXPECT_GT(report.g4_errors, 0U);  // the dead shard's commands
  EXPECT_EQ(report.g4_checksum_failures, 0U);
  EXPECT_EQ(report.mismatches, 0U);
}

// Issue 31, H1: with --instances 4, Redis stopped (SIGSTOP) for 60 s made a
// 2.9 s replay take 61.7 s: every lookup of every instance waited its
// timeout. Now a node that failed is left alone for a back-off the process
// shares (1 s doubling, at most 30 s) and a lookup never waits longer than
// the timeout: a store stalled for the whole run adds at most one timeout
// per back-off period.
TEST(ReplayerShared, FourInstancesOnAStalledStoreEndWithinTheBound) {
  RedisServers redis(1, "2gb");
  KVTIER_REQUIRE_REDIS(redis);
  memory::HostRuntime runtime;
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 100);
  double alone_s = 0.0;
  const auto without = four_instances_alone(runtime, trace, &alone_s);
  ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, redis.urls(), "stalled");
  c.instances = 4;
  ASSERT_TRUE(redis.signal(0, "STOP"));
  const auto start = std::chrono::steady_clock::now();
  ReplayReport stalled;
  {
    const auto reports = replay_instances(runtime, c, trace);
    stalled = combine(reports);
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(redis.signal(0, "CONT"));
  // Probes at 0, 1, 3, 7, 15 ... s: log2 of the run's length, 250 ms each, plus the
  // publishes queued at the end, each pipeline bounded the same way.
  const double bound = 2.0 * alone_s + 0.25 * (2.0 + std::log2(1.0 + alone_s)) + 2.0;
  EXPECT_LT(took.count(), bound) << "alone " << alone_s << " s";
  EXPECT_EQ(stalled.requests, trace.size());
  EXPECT_EQ(stalled.prompt_blocks, without.prompt_blocks);
  EXPECT_EQ(stalled.g4_hit_blocks, 0U);
  EXPECT_GT(stalled.g4_errors, 0U);
  EXPECT_EQ(stalled.g4_answered, 0U);
  EXPECT_EQ(stalled.mismatches, 0U);
}

// Issue 31, C2: flip a payload and recompute both checksums in Redis, and the
// replay fetched 4,370 blocks "verified" with 4,455 mismatches. Under a tier
// key every forged value is refused, counted and deleted: no wrong byte.
TEST(ReplayerShared, ForgedValuesAreServedWithoutATierKeyAndRefusedWithOne) {
  RedisServers redis(1, "1gb");
  KVTIER_REQUIRE_REDIS(redis);
  kvtier::testing::ScratchDirectory scratch("kvtier-replay-forged-g4");
  const std::filesystem::path key = scratch.path() / "key";
  std::ofstream(key) << "a tier key of more than thirty-two bytes of secret";
  std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  memory::HostRuntime runtime;
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 50);
  for (const bool keyed : {false, true}) {
    const std::string space = keyed ? "forged-keyed" : "forged";
    ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, redis.urls(), space);
    if (keyed) c.session.tier_key_file = key;
    const auto first = replay(runtime, c, trace);
    ASSERT_GT(first.g4_blocks_published, 0U);
    // Everything under the namespace, forged by a client without the key.
    const std::string keys = redis.cli(0, "--scan --pattern '" + space + ":*'");
    tiers::shared::RedisNode node(tiers::shared::parse_redis_url(redis.urls()[0]), tiers::shared::RedisNodeLimits{});
    std::size_t forged = 0;
    std::istringstream lines(keys);
    for (std::string k; std::getline(lines, k);) {
      const tiers::shared::RedisCommand get{.args = {"GET", k}};
      auto got = node.pipeline(std::span(&get, 1));
      ASSERT_NE(got[0], nullptr);
      std::string value(got[0]->str, got[0]->len);
      kvtier::testing::forge_record(std::as_writable_bytes(std::span(value.data(), value.size())),
                                    tiers::record_header_bytes(0));
      const tiers::shared::RedisCommand set{.args = {"SET", k, value}};
      ASSERT_NE(node.pipeline(std::span(&set, 1))[0], nullptr);
      ++forged;
    }
    ASSERT_GT(forged, 0U);
    const auto second = replay(runtime, c, trace);  // a new instance: cold G1 and G2
    if (!keyed) {
      EXPECT_GT(second.mismatches, 0U) << "the threat docs/shared-tier.md describes";
      continue;
    }
    EXPECT_EQ(second.mismatches, 0U);  // hits now are blocks it published again after refusing the forgeries
    EXPECT_GT(second.g4_authentication_failures, 0U);
  }
}

}  // namespace
}  // namespace kvtier::replay
