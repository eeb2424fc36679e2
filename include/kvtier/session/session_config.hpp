#pragma once
// Every setting of a kvtier session, and the one set of defaults that the
// script's init, Python's Manager and `kvtier replay` share.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/offload/tier_admission.hpp"

namespace kvtier::session {

/// A G3 disk tier under G2 (docs/disk.md).
struct DiskTierSettings {
  /// A directory (created when missing); the tier is its file kDiskTierFile.
  std::filesystem::path path;
  std::uint32_t blocks = 0;  // capacity in blocks (> 0)
  unsigned queue_depth = 32;
  /// Blocks whose write may wait for the queue (each holds a slot's buffer):
  /// a burst of G2 evictions beyond it is not demoted.
  unsigned backlog = 128;
  /// Discard a tier of another layout found there (otherwise a ConfigError).
  bool reformat = false;
  /// A block counts as stored once an fdatasync covered it (DiskSync::Batch:
  /// power-loss durable, one fdatasync per batch), not once its write completed.
  bool sync_batch = false;
};
inline constexpr const char* kDiskTierFile = "kvtier-g3.slots";

/// A G4 tier under G2: a store shared by many instances on Redis
/// (docs/shared-tier.md).
struct SharedTierSettings {
  /// redis://HOST[:PORT]: one node, or several seeds of a Redis Cluster.
  std::vector<std::string> urls;
  /// The user's part of every key (instances share under the same one).
  std::string key_namespace = "kvtier";
  std::uint32_t ttl_seconds = 0;  // 0: until Redis evicts
  /// Blocks queued for publishing: a burst of G2 evictions beyond it is not published.
  std::uint32_t max_in_flight = 256;
  std::uint32_t timeout_ms = 250;  // per connect, command and reply
  /// Publish each block as it lands in G2 (eager) or when G2 evicts it (lazy).
  bool publish_on_landing = true;
};

/// The defaults (docs/architecture.md, "Sessions"): the native backend with
/// prefix caching, 4096 G1 pages of 16 tokens, 2 layers x 2 KV heads x 64
/// dims in bf16, page-major (one chunk a page: what offload copies), the
/// CUDA runtime when a device is present, no G2 tier.
struct SessionConfig {
  g1::G1ManagerConfig manager{.capacity = 4096, .block_size = 16};
  /// Its tokens_per_block is always the manager's block size.
  KvGeometry geometry{};
  PageLayout layout = PageLayout::PageMajor;
  memory::RuntimeChoice device = memory::RuntimeChoice::Auto;
  /// > 0: a G2 offload tier of this many pinned host pages.
  std::uint32_t host_blocks = 0;
  /// Blocks per swap-out batch; the offload engine's default when not given.
  std::optional<std::uint32_t> offload_batch{};
  /// Checksum each block landing in G2 and check it before it comes back.
  bool verify_swaps = false;
  /// A G3 disk tier under G2 (needs host_blocks > 0 and a build with liburing).
  std::optional<DiskTierSettings> disk{};
  /// A G4 shared tier under G2, beside G3 when both are given (needs
  /// host_blocks > 0 and a build with hiredis).
  std::optional<SharedTierSettings> shared{};
  /// What G2, G3 and G4 store of the blocks evicted above them, and G2's
  /// eviction order (docs/policies.md); the defaults store every block and
  /// keep the spec's orders. Each needs its tier (ConfigError otherwise).
  offload::TierAdmission g2_admission = offload::TierAdmission::All;
  offload::TierAdmission g3_admission = offload::TierAdmission::All;
  offload::TierAdmission g4_admission = offload::TierAdmission::All;
  std::optional<g1::EvictionBackend> g2_eviction{};
  /// A tier key for G3 and G4 (tiers/tier_key.hpp): every record they write
  /// carries its MAC and only records with a valid one are served. Without
  /// one, KVTIER_TIER_KEY_FILE is read when a G3 or G4 tier is configured.
  std::optional<std::filesystem::path> tier_key_file{};
  /// A manager with KV cache groups: the bytes of each pool page in memory.
  /// Not given: the groups' page (ModelGeometry::page_bytes), the model's real
  /// size. Given: pages of this size hold the same patterns — a replay of a
  /// model pool of real page count checks its bytes on smaller pages (a
  /// multiple of 8, at least 64; ConfigError otherwise or without groups).
  std::optional<std::uint64_t> group_page_bytes{};
  /// Listeners of the manager's KV events, besides the session's own counter.
  std::vector<std::shared_ptr<KvEventSink>> event_sinks{};

  /// Sets the backend by name ("native" | "kvbm") and, for kvbm, its eviction
  /// ("lineage" when not given); ConfigError for another name or an eviction
  /// given to the native backend.
  void set_backend(std::string_view backend, std::optional<std::string_view> eviction);
  /// ConfigError for an impossible configuration.
  void validate() const;
  /// tier_key_file, else KVTIER_TIER_KEY_FILE when a G3 or G4 tier is configured.
  std::optional<std::filesystem::path> effective_tier_key_file() const;
  /// The G1 pool's layout: the geometry with the manager's block size.
  KvLayout kv_layout() const;
};

}  // namespace kvtier::session
