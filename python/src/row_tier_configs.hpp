#pragma once
// The configurations of G3 and G4 over an engine's memory, from the options
// kvtier's engine adapters pass (kvtier.vllm's row tiers, kvtier.sglang's pages).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/tier_key.hpp"
#if KVTIER_WITH_URING
#include "kvtier/tiers/rows/disk_rows.hpp"
#endif
#if KVTIER_WITH_REDIS
#include "kvtier/tiers/rows/shared_rows.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#endif

namespace kvtier::python {

inline std::optional<tiers::TierKey> tier_key_from(const std::optional<std::string>& key_file) {
  return key_file ? std::optional(tiers::TierKey::from_file(*key_file)) : std::nullopt;
}

#if KVTIER_WITH_URING
inline tiers::rows::DiskRowsConfig disk_rows_config(const std::string& path, std::uint32_t capacity_blocks,
                                                    const std::string& namespace_text, unsigned queue_depth,
                                                    unsigned backlog, bool sync,
                                                    const std::optional<std::string>& key_file, bool reformat) {
  return tiers::rows::DiskRowsConfig{
      .store = {.file = path,
                .slots = capacity_blocks,
                .queue_depth = queue_depth,
                .backlog = backlog,
                .reformat = reformat,
                .key = tier_key_from(key_file),
                .sync = sync ? tiers::disk::DiskSync::Batch : tiers::disk::DiskSync::None},
      .namespace_text = namespace_text};
}
#endif

#if KVTIER_WITH_REDIS
inline tiers::rows::SharedRowsConfig shared_rows_config(const std::vector<std::string>& urls,
                                                        const std::string& key_namespace,
                                                        const std::string& namespace_text, unsigned deadline_ms,
                                                        unsigned retry_after_ms, std::uint32_t ttl_seconds,
                                                        const std::optional<std::string>& key_file) {
  if (urls.empty()) throw ConfigError("the shared tier needs at least one redis:// URL");
  tiers::rows::SharedRowsConfig config{.store = {.endpoints = {},
                                                 .auth = tiers::shared::redis_auth_of(urls),
                                                 .key_namespace = key_namespace,
                                                 .ttl_seconds = ttl_seconds,
                                                 .timeout = std::chrono::milliseconds(deadline_ms),
                                                 .retry_after = std::chrono::milliseconds(retry_after_ms),
                                                 .key = tier_key_from(key_file)},
                                       .namespace_text = namespace_text};
  for (const std::string& url : urls) config.store.endpoints.push_back(tiers::shared::parse_redis_url(url));
  return config;
}
#endif

}  // namespace kvtier::python
