#include "kvtier/session/session_config.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::session {

void SessionConfig::set_backend(std::string_view backend, std::optional<std::string_view> eviction) {
  if (backend != "native" && backend != "kvbm") {
    throw ConfigError("backend must be \"native\" or \"kvbm\", not \"" + std::string(backend) + "\"");
  }
  if (backend == "native" && eviction) throw ConfigError("eviction applies to the kvbm backend only");
  manager.backend = backend == "kvbm" ? g1::G1Backend::Kvbm : g1::G1Backend::Native;
  manager.eviction = g1::parse_eviction_backend(eviction.value_or("lineage"));
}

void SessionConfig::validate() const {
  // The manager, the layout and the offload engine check their own settings.
  if (manager.capacity > 0xFFFFFFF0U) throw ConfigError("capacity is too large");
  if (group_page_bytes) {
    if (manager.groups.empty()) throw ConfigError("group_page_bytes is for a manager with KV cache groups");
    if (*group_page_bytes < 64 || *group_page_bytes % 8 != 0 || *group_page_bytes > (std::uint64_t{1} << 32)) {
      throw ConfigError("group_page_bytes must be a multiple of 8 in [64, 2^32], not " +
                        std::to_string(*group_page_bytes));
    }
  }
  if (host_blocks == 0 && (offload_batch || verify_swaps)) {
    throw ConfigError("offload_batch and verify_swaps need the offload tier (host_blocks > 0)");
  }
  if (host_blocks == 0 && (g2_admission != offload::TierAdmission::All || g2_eviction)) {
    throw ConfigError("g2_admission and g2_eviction need the offload tier (host_blocks > 0)");
  }
  if (!disk && g3_admission != offload::TierAdmission::All) throw ConfigError("g3_admission needs a disk tier (G3)");
  if (!shared && g4_admission != offload::TierAdmission::All) {
    throw ConfigError("g4_admission needs a shared tier (G4)");
  }
  if (disk) {
    if (host_blocks == 0) throw ConfigError("the disk tier (G3) sits under G2: it needs host_blocks > 0");
    if (disk->path.empty()) throw ConfigError("the disk tier needs a directory (disk_path)");
    if (disk->blocks == 0) throw ConfigError("the disk tier needs disk_blocks > 0");
    if (disk->queue_depth == 0 || disk->queue_depth > 4096) throw ConfigError("disk_queue_depth must be in 1..4096");
    if (disk->backlog > 65536) throw ConfigError("disk_backlog must be at most 65536 blocks");
    if (std::size_t{disk->queue_depth} + disk->backlog < 2) {
      throw ConfigError("disk_queue_depth + disk_backlog must be at least 2 (one buffer is kept for reads): " +
                        std::to_string(disk->queue_depth) + " + " + std::to_string(disk->backlog) +
                        " would never write a block");
    }
  }
  if (tier_key_file && !disk && !shared) {
    throw ConfigError("a tier key authenticates G3 and G4 records: it needs a disk or shared tier");
  }
  if (tier_key_file && tier_key_file->empty()) throw ConfigError("the tier key file's path is empty");
  if (shared) {
    if (host_blocks == 0) throw ConfigError("the shared tier (G4) sits under G2: it needs host_blocks > 0");
    if (shared->urls.empty()) throw ConfigError("the shared tier needs at least one redis:// URL");
    for (const std::string& url : shared->urls) (void)tiers::shared::parse_redis_url(url);
    (void)tiers::shared::redis_auth_of(shared->urls);
    if (shared->key_namespace.empty()) throw ConfigError("the shared tier's key namespace must not be empty");
    if (shared->key_namespace.find_first_of("{}") != std::string::npos) {
      throw ConfigError("the shared tier's key namespace '" + shared->key_namespace +
                        "' must not hold '{' or '}': a Redis Cluster hash tag would put every block on one shard");
    }
    if (shared->max_in_flight == 0 || shared->max_in_flight > 65536) {
      throw ConfigError("the shared tier's in-flight bound must be in 1..65536 blocks");
    }
    if (shared->timeout_ms == 0 || shared->timeout_ms > 60000) {
      throw ConfigError("the shared tier's timeout must be in 1..60000 ms");
    }
  }
}

std::optional<std::filesystem::path> SessionConfig::effective_tier_key_file() const {
  if (tier_key_file) return tier_key_file;
  if (!disk && !shared) return std::nullopt;
  return tiers::tier_key_file_from_environment();
}

KvLayout SessionConfig::kv_layout() const {
  KvGeometry g = geometry;
  g.tokens_per_block = manager.block_size;
  return KvLayout(g, layout, manager.capacity);
}

}  // namespace kvtier::session
