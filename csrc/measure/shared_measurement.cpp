#include "kvtier/measure/shared_measurement.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "tier_bench_blocks.hpp"

#if KVTIER_WITH_REDIS
#include <hiredis/hiredis.h>
#include <xxhash.h>

#include <cstring>

#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/shared/redis_cluster.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "kvtier/tiers/shared/shared_store.hpp"
#endif

namespace kvtier::measure {

bool shared_measurement_available() noexcept { return KVTIER_WITH_REDIS != 0; }

#if KVTIER_WITH_REDIS
namespace {

using detail::Clock;
using detail::median;
using detail::seconds_since;

KvLayout shared_page_layout(std::size_t page_bytes) { return detail::tier_bench_layout(page_bytes, "shared"); }
using detail::tier_bench_block;

std::vector<std::byte> payload_of(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::byte> page(bytes);
  for (std::size_t i = 0; i < bytes; ++i) page[i] = static_cast<std::byte>((seed * 131 + i * 7) & 0xFF);
  return page;
}

struct StoreTimes {
  double put_s = 0.0;
  double get_s = 0.0;
  std::vector<double> put_batches;
  std::vector<double> get_batches;
};

/// The store's side: publishes `blocks` fresh blocks (numbered from `first_block`)
/// a batch at a time (each batch until answered), then looks up and reads them
/// back a batch at a time.
StoreTimes time_store(tiers::shared::SharedStore& store, std::span<const std::byte> payload, std::size_t first_block,
                      std::size_t blocks, std::size_t batch, std::size_t& verified) {
  StoreTimes t;
  std::vector<g1::TieredBlock> none;
  for (std::size_t first = 0; first < blocks; first += batch) {
    const std::size_t n = std::min(batch, blocks - first);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      if (store.write(tier_bench_block(first_block + first + i), payload, none) !=
          tiers::LowerTier::WriteStart::Started) {
        throw ConfigError("the shared tier refused a publish (batch larger than its in-flight bound?)");
      }
    }
    const auto progress = store.poll(true);
    t.put_batches.push_back(seconds_since(start));
    t.put_s += t.put_batches.back();
    if (progress.stored.size() != n) throw ConfigError("the shared store did not take every block (is it up?)");
  }
  std::vector<std::vector<std::byte>> pages(batch, std::vector<std::byte>(payload.size()));
  std::vector<std::byte*> pointers;
  for (auto& page : pages) pointers.push_back(page.data());
  for (std::size_t first = 0; first < blocks; first += batch) {
    const std::size_t n = std::min(batch, blocks - first);
    std::vector<PositionalLineageHash> plhs;
    for (std::size_t i = 0; i < n; ++i) plhs.push_back(tier_bench_block(first_block + first + i).plh);
    const auto start = Clock::now();
    const auto found = store.lookup(plhs);
    if (std::count_if(found.begin(), found.end(), [](const auto& b) { return b.has_value(); }) !=
        static_cast<std::ptrdiff_t>(n)) {
      throw ConfigError("a published block was not found (maxmemory too small for the bench?)");
    }
    if (!store.read(plhs, std::span(pointers).first(n))) throw ConfigError("the shared tier refused a read");
    const auto progress = store.poll(true);
    t.get_batches.push_back(seconds_since(start));
    t.get_s += t.get_batches.back();
    for (const auto& read : progress.reads) {
      for (std::size_t i = 0; i < read.ok.size(); ++i) {
        if (!read.ok[i] || !std::equal(payload.begin(), payload.end(), pages[i].begin())) {
          throw ConfigError("a block did not come back verified from the shared store");
        }
        ++verified;
      }
    }
  }
  return t;
}

struct CeilingTimes {
  double put_s = 0.0;
  double get_s = 0.0;
  std::vector<double> get_batches;
  /// What a verified fetch does beyond the raw GET, timed on the GET's own
  /// replies right after they arrived: XXH3 of each payload, then its copy
  /// into a page (the G2 page of a real fetch).
  double verify_copy_s = 0.0;
  std::vector<double> verify_copy_batches;
  std::uint64_t digests = 0;  // the hashes' XOR: what they computed is kept, as a fetch keeps its verdict
};

/// The store alone: pipelined SETs, then GETs, of values of the same size,
/// a batch per pipeline, on a client of the same kind. The GETs' payloads
/// (past `header_bytes`) are then hashed and copied, timed apart.
CeilingTimes time_ceiling(tiers::shared::RedisCluster& cluster, const std::string& prefix, const std::string& value,
                          std::size_t header_bytes, std::size_t blocks, std::size_t batch) {
  CeilingTimes t;
  std::vector<std::vector<std::byte>> pages(batch, std::vector<std::byte>(value.size() - header_bytes));
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < blocks; ++i) keys.push_back(prefix + std::to_string(i));
  for (const bool get : {false, true}) {
    for (std::size_t first = 0; first < blocks; first += batch) {
      const std::size_t n = std::min(batch, blocks - first);
      std::vector<tiers::shared::RedisCommand> commands;
      for (std::size_t i = 0; i < n; ++i) {
        commands.push_back(get ? tiers::shared::RedisCommand{.args = {"GET", keys[first + i]}}
                               : tiers::shared::RedisCommand{.args = {"SET", keys[first + i], value}});
      }
      const auto start = Clock::now();
      const auto replies = cluster.run(commands);
      const double took = seconds_since(start);
      for (const auto& reply : replies) {
        if (reply == nullptr || reply->type == REDIS_REPLY_ERROR ||
            (get && (reply->type != REDIS_REPLY_STRING || reply->len != value.size()))) {
          throw ConfigError("the store did not answer the ceiling's " + std::string(get ? "GET" : "SET"));
        }
      }
      (get ? t.get_s : t.put_s) += took;
      if (!get) continue;
      t.get_batches.push_back(took);
      const auto verify_start = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        const char* payload = replies[i]->str + header_bytes;
        const std::size_t payload_bytes = pages[i].size();
        t.digests ^= XXH3_64bits(payload, payload_bytes);
        std::memcpy(pages[i].data(), payload, payload_bytes);
      }
      t.verify_copy_batches.push_back(seconds_since(verify_start));
      t.verify_copy_s += t.verify_copy_batches.back();
    }
  }
  std::vector<tiers::shared::RedisCommand> cleanup;
  for (const std::string& key : keys) cleanup.push_back(tiers::shared::RedisCommand{.args = {"DEL", key}});
  (void)cluster.run(cleanup);
  return t;
}

}  // namespace

SharedPoint measure_shared(const std::vector<std::string>& urls, std::size_t page_bytes, std::size_t batch,
                           std::size_t bytes, std::size_t iterations) {
  if (batch == 0 || batch > 4096) throw ConfigError("a shared bench batch must be in 1..4096 blocks");
  if (iterations == 0) throw ConfigError("iterations must be at least 1");
  const KvLayout layout = shared_page_layout(page_bytes);
  std::vector<tiers::shared::RedisEndpoint> endpoints;
  for (const std::string& url : urls) endpoints.push_back(tiers::shared::parse_redis_url(url));
  if (endpoints.empty()) throw ConfigError("the shared bench needs a redis:// URL");
  const std::size_t blocks = std::max<std::size_t>(batch, bytes / page_bytes);
  const std::vector<std::byte> payload = payload_of(page_bytes, blocks);
  // The ceiling's values are as large as the store's: record header + page.
  const std::string value(tiers::record_header_bytes(0) + page_bytes, 'v');
  const tiers::shared::RedisAuth auth = tiers::shared::redis_auth_of(urls);
  tiers::shared::RedisCluster raw(tiers::shared::RedisClusterConfig{.seeds = endpoints, .auth = auth});
  SharedPoint point{.page_bytes = page_bytes, .batch = batch, .blocks = blocks, .iterations = iterations};
  std::vector<double> put, get, keyed_put, keyed_get, ceiling_put, ceiling_get, put_ms, get_ms, ceiling_get_ms,
      verify_copy_ms, put_ratios, get_ratios, best_get_ratios;
  const double payload_bytes = static_cast<double>(blocks * page_bytes);
  const std::optional<tiers::TierKey> key = detail::tier_bench_key();
  // One store (and its connections) for every iteration, as the ceiling has
  // one client: a store made anew each iteration fetched its first batch on a
  // connection TCP had not yet opened up (3x a warm batch), which the
  // ceiling's long-lived connection had only in the first iteration.
  // Each iteration publishes and fetches blocks of its own.
  const std::string space = "kvtier-bench-" + std::to_string(::getpid());
  std::vector<std::unique_ptr<tiers::shared::SharedStore>> stores;
  for (const bool keyed : {false, true}) {
    if (keyed && !key) continue;
    stores.push_back(std::make_unique<tiers::shared::SharedStore>(
        tiers::shared::SharedStoreConfig{.endpoints = endpoints,
                                         .auth = auth,
                                         .key_namespace = keyed ? space + "-keyed" : space,
                                         .max_writes_in_flight = static_cast<std::uint32_t>(batch),
                                         .max_reads_in_flight = static_cast<std::uint32_t>(batch),
                                         .key = keyed ? key : std::nullopt},
        layout));
  }
  for (std::size_t it = 0; it < iterations; ++it) {
    for (std::size_t k = 0; k < stores.size(); ++k) {
      const bool keyed = k == 1;
      tiers::shared::SharedStore& store = *stores[k];
      const StoreTimes s = time_store(store, payload, it * blocks, blocks, batch, point.verified_reads);
      (keyed ? keyed_put : put).push_back(detail::gbps(payload_bytes, s.put_s));
      (keyed ? keyed_get : get).push_back(detail::gbps(payload_bytes, s.get_s));
      if (!keyed) {
        put_ms.push_back(median(s.put_batches) * 1e3);
        get_ms.push_back(median(s.get_batches) * 1e3);
      }
      std::vector<tiers::shared::RedisCommand> cleanup;
      std::vector<std::string> keys;
      for (std::size_t i = 0; i < blocks; ++i) keys.push_back(store.key(tier_bench_block(it * blocks + i).plh));
      for (const std::string& name : keys) cleanup.push_back(tiers::shared::RedisCommand{.args = {"DEL", name}});
      (void)raw.run(cleanup);
    }
    const CeilingTimes c = time_ceiling(raw, space + "-" + std::to_string(it) + ":raw:", value,
                                        tiers::record_header_bytes(0), blocks, batch);
    ceiling_put.push_back(payload_bytes / c.put_s / 1e9);
    ceiling_get.push_back(payload_bytes / c.get_s / 1e9);
    ceiling_get_ms.push_back(median(c.get_batches) * 1e3);
    verify_copy_ms.push_back(median(c.verify_copy_batches) * 1e3);
    best_get_ratios.push_back(c.get_s / (c.get_s + c.verify_copy_s));
    put_ratios.push_back(put.back() / ceiling_put.back());
    get_ratios.push_back(get.back() / ceiling_get.back());
  }
  point.put_gbps = median(put);
  point.get_gbps = median(get);
  point.keyed_put_gbps = median(keyed_put);
  point.keyed_get_gbps = median(keyed_get);
  point.ceiling_put_gbps = median(ceiling_put);
  point.ceiling_get_gbps = median(ceiling_get);
  point.put_batch_ms = median(put_ms);
  point.get_batch_ms = median(get_ms);
  point.ceiling_get_batch_ms = median(ceiling_get_ms);
  point.verify_copy_batch_ms = median(verify_copy_ms);
  point.verified_ceiling_of_ceiling = median(best_get_ratios);
  point.put_of_ceiling = median(put_ratios);
  point.get_of_ceiling = median(get_ratios);
  return point;
}

#else

SharedPoint measure_shared(const std::vector<std::string>&, std::size_t, std::size_t, std::size_t, std::size_t) {
  throw ConfigError("this kvtier was built without hiredis: no shared tier to measure");
}

#endif

}  // namespace kvtier::measure
