#include "kvtier/session/shared_tier_factory.hpp"

#include <atomic>
#include <cstdio>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"

#if KVTIER_WITH_REDIS
#include "kvtier/tiers/shared/shared_store.hpp"
#endif

namespace kvtier::session {

bool shared_tier_available() noexcept { return KVTIER_WITH_REDIS != 0; }

#if KVTIER_WITH_REDIS

std::unique_ptr<tiers::LowerTier> open_shared_tier(const SharedTierSettings& settings, const KvLayout& g2_layout,
                                                   const tiers::TierKey* key,
                                                   std::vector<std::uint64_t> group_formats) {
  tiers::shared::SharedStoreConfig config{.endpoints = {},
                                          .key_namespace = settings.key_namespace,
                                          .ttl_seconds = settings.ttl_seconds,
                                          .max_writes_in_flight = settings.max_in_flight,
                                          .max_reads_in_flight = settings.max_in_flight,
                                          .timeout = std::chrono::milliseconds(settings.timeout_ms),
                                          .retry_after = std::chrono::milliseconds(1000),
                                          .key = key != nullptr ? std::optional<tiers::TierKey>(*key) : std::nullopt,
                                          .group_formats = std::move(group_formats),
                                          .publish_on_landing = settings.publish_on_landing};
  for (const std::string& url : settings.urls) config.endpoints.push_back(tiers::shared::parse_redis_url(url));
  config.auth = tiers::shared::redis_auth_of(settings.urls);
  auto store = std::make_unique<tiers::shared::SharedStore>(std::move(config), g2_layout);
  static std::atomic<bool> warned{false};
  if (key == nullptr && !warned.exchange(true)) {
    std::fprintf(stderr,
                 "kvtier: the shared tier runs without a tier key: whoever can write namespace '%s' on the store can "
                 "change what every instance attends to (give one: --tier-key-file, KVTIER_TIER_KEY_FILE; "
                 "docs/shared-tier.md)\n",
                 settings.key_namespace.c_str());
  }
  return store;
}

std::vector<std::pair<const char*, std::uint64_t>> shared_tier_counters(const tiers::LowerTier& tier) {
  const auto* store = dynamic_cast<const tiers::shared::SharedStore*>(&tier);
  if (store == nullptr) return {};
  const tiers::LowerTierStats io = store->stats();
  const tiers::shared::SharedStoreStats shared = store->shared_stats();
  return {{"shared_known", store->used()},
          {"shared_blocks_published", io.blocks_written},
          {"shared_already_present", shared.already_present},
          {"shared_publishes_refused", io.writes_refused},
          {"shared_lookups", shared.lookups},
          {"shared_lookup_hits", shared.lookup_hits},
          {"shared_blocks_fetched", io.blocks_read},
          {"shared_values_missing", shared.values_missing},
          {"shared_checksum_failures", io.checksum_failures},
          {"shared_authentication_failures", io.authentication_failures},
          {"shared_other_layout", shared.other_layout},
          {"shared_other_version", shared.other_version},
          {"shared_oversized", shared.oversized},
          {"shared_answered", shared.answered},
          {"shared_read_only", shared.read_only ? 1U : 0U},
          {"shared_errors", shared.errors}};
}

#else

std::unique_ptr<tiers::LowerTier> open_shared_tier(const SharedTierSettings&, const KvLayout&, const tiers::TierKey*,
                                                   std::vector<std::uint64_t>) {
  throw ConfigError("this kvtier was built without hiredis: no shared tier (scripts/install-deps.sh, KVTIER_REDIS=ON)");
}

std::vector<std::pair<const char*, std::uint64_t>> shared_tier_counters(const tiers::LowerTier&) { return {}; }

#endif

}  // namespace kvtier::session
