#include "g1/native/groups/grouped_backend.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

GroupedBackend::GroupedBackend(ModelGeometry geometry, std::uint32_t capacity, bool enable_prefix_caching,
                               KvEventPublisher& publisher)
    : coordinator_(std::move(geometry), capacity, enable_prefix_caching),
      caching_(enable_prefix_caching),
      publisher_(publisher) {}

void GroupedBackend::refuse_signal() {
  throw ContractError(
      "a manager with KV cache groups takes requests (allocate, generate, finalize with its sequence, free), not "
      "MoveBlock signals: Dynamo's signals name one block table per request");
}

void GroupedBackend::check_sequence(const ActiveSequence& sequence) const {
  KVTIER_EXPECTS(sequence.block_size() == coordinator_.geometry().hash_block_size(), "a sequence of block_size ",
                 sequence.block_size(), " on a manager whose hash unit is ", coordinator_.geometry().hash_block_size());
}

std::vector<SequenceHash> GroupedBackend::hashes_of(const ActiveSequence& sequence, std::size_t limit) const {
  check_sequence(sequence);
  std::vector<SequenceHash> hashes;
  if (!caching_) return hashes;
  const auto blocks = sequence.blocks();
  const std::size_t complete = std::min(limit, sequence.len() / sequence.block_size());
  hashes.reserve(complete);
  for (std::size_t i = 0; i < complete; ++i) {
    if (i < blocks.size() && blocks[i].is_full()) {
      hashes.push_back(blocks[i].hash());
      continue;
    }
    // A complete tail the sequence has not promoted yet: the same chained hash.
    const std::span<const TokenId> tokens = sequence.tokens().subspan(i * sequence.block_size(), sequence.block_size());
    hashes.push_back(compute_sequence_hash(i == 0 ? std::nullopt : std::optional<SequenceHash>(hashes.back()),
                                           compute_local_block_hash(tokens)));
  }
  return hashes;
}

KvEventGroup GroupedBackend::event_group(std::size_t group) const {
  const GroupSpec& spec = coordinator_.geometry().groups()[group].spec;
  return KvEventGroup{.index = static_cast<std::uint32_t>(group),
                      .kind = group_kind_name(spec.kind),
                      .sliding_window = is_windowed(spec.kind) ? std::optional(spec.sliding_window) : std::nullopt,
                      .block_size = spec.block_size};
}

void GroupedBackend::publish_removed() {
  for (std::size_t g = 0; g < coordinator_.group_count(); ++g) {
    publisher_.publish_removed(StorageTier::Device, KvRemoved{.hashes = coordinator_.take_removed(g)}, event_group(g));
  }
}

G1Acquire GroupedBackend::allocate(OwnerId owner, const ActiveSequence& sequence, std::size_t tokens,
                                   std::size_t reuse_tokens) {
  KVTIER_EXPECTS(tokens <= sequence.len(), "cannot allocate ", tokens, " tokens of a sequence of ", sequence.len());
  const std::vector<SequenceHash> hashes = hashes_of(sequence);
  for (;;) {
    const bool ready = coordinator_.allocate(owner, hashes, tokens, reuse_tokens);
    publish_removed();
    if (ready) return G1Acquire::ready(coordinator_.table(owner, 0).size());
    if (tier_ == nullptr) return G1Acquire::capacity_exhausted();
    // Evictions of last copies went to quarantine: the tier copies them first (§5.3).
    const auto transfer = swap_out_quarantined();
    if (!transfer) return G1Acquire::capacity_exhausted();
    if (*transfer != 0) return blocked_on(*transfer);
  }
}

void GroupedBackend::finalize(OwnerId owner, const ActiveSequence& sequence, std::size_t computed) {
  const std::vector<SequenceHash> hashes = hashes_of(sequence);
  const auto cached = coordinator_.finalize(owner, hashes, computed);
  for (std::size_t g = 0; g < cached.size(); ++g) {
    if (cached[g].empty()) continue;
    // One run per group: blocks a group does not cache are left out (spec §6).
    KvStored stored;
    const std::size_t first = cached[g].front().block;
    if (first > 0) stored.parent = hashes[coordinator_.hash_index(g, first - 1)];
    const std::size_t bs = coordinator_.geometry().groups()[g].spec.block_size;
    const bool with_ids = sequence.emits_token_ids() && sequence.len() >= (cached[g].back().block + 1) * bs;
    if (with_ids) stored.token_ids = StoredTokenIds{};
    for (const auto& block : cached[g]) {
      if (!with_ids) {
        stored.blocks.push_back(StoredBlock{block.hash, LocalBlockHash(0)});
        continue;
      }
      // vLLM's BlockStored carries each block's tokens at its group's block size (a router hashes them).
      const std::span<const TokenId> tokens = sequence.tokens().subspan(block.block * bs, bs);
      stored.blocks.push_back(StoredBlock{block.hash, compute_local_block_hash(tokens)});
      stored.token_ids->append(tokens);
    }
    if (tier_ != nullptr) remember_for_tier(g, cached[g], stored, hashes);
    publisher_.publish_stored(StorageTier::Device, std::move(stored), event_group(g));
  }
}

void GroupedBackend::remember_for_tier(std::size_t group, std::span<const GroupCoordinator::CachedBlock> cached,
                                       const KvStored& stored, std::span<const SequenceHash> hashes) {
  const std::uint64_t format = coordinator_.geometry().block_fingerprint(group);
  for (std::size_t i = 0; i < cached.size(); ++i) {
    const std::size_t b = cached[i].block;
    tier_blocks_[cached[i].page.value()] =
        TieredBlock{.plh = group_tier_key(cached[i].hash, group),
                    .hash = cached[i].hash,
                    .parent = b > 0 ? std::optional(hashes[coordinator_.hash_index(group, b - 1)]) : std::nullopt,
                    .local = stored.blocks[i].local,
                    .token_ids = std::nullopt,
                    .format = format};
  }
}

void GroupedBackend::free(OwnerId owner) { coordinator_.free(owner); }

GroupPatterns GroupedBackend::patterns(OwnerId owner, const ActiveSequence& sequence, std::size_t group,
                                       std::size_t first_block, std::size_t end_block) const {
  const auto table = coordinator_.table(owner, group);
  end_block = std::min(end_block, table.size());
  const std::size_t block_size = coordinator_.geometry().groups()[group].spec.block_size;
  // Only the hashes the range's complete blocks name.
  const std::vector<SequenceHash> hashes = first_block < end_block
                                               ? hashes_of(sequence, coordinator_.hash_index(group, end_block - 1) + 1)
                                               : std::vector<SequenceHash>{};
  const auto mix = [](std::uint64_t a, std::uint64_t b) {
    std::uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ULL + (a << 6) + (a >> 2));
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ULL;
    return x ^ (x >> 29);
  };
  GroupPatterns out;
  for (std::size_t b = first_block; b < end_block; ++b) {
    if (table[b] == coordinator_.null_page()) continue;
    const bool complete = (b + 1) * block_size <= sequence.len() && caching_;
    out.pages.push_back(table[b]);
    out.identities.push_back(complete ? mix(hashes[coordinator_.hash_index(group, b)].value(), group)
                                      : mix(mix(owner.value(), group), b) ^ 0x5A5A5A5A5A5A5A5AULL);
  }
  return out;
}

PrefillCost GroupedBackend::prefill_cost(const ActiveSequence& sequence) const {
  const std::vector<SequenceHash> hashes = hashes_of(sequence);
  const GroupHit hit = coordinator_.find_hit(hashes, sequence.len());
  PrefillCost cost{.cached_tokens = hit.tokens,
                   .active_cached_tokens = hit.active_tokens,
                   .uncached_common_prefix_tokens = hit.uncached_common_prefix};
  cost.new_tokens = sequence.len() - hit.tokens;
  for (const ResolvedGroup& group : coordinator_.geometry().groups()) {
    const std::size_t bs = group.spec.block_size;
    cost.new_blocks += (sequence.len() + bs - 1) / bs - hit.tokens / bs;
  }
  return cost;
}

G1Metrics GroupedBackend::metrics() const {
  G1Metrics metrics{.capacity = coordinator_.usable_capacity() + (coordinator_.null_page() ? 1 : 0)};
  for (const GroupUsage& group : coordinator_.usage()) {
    metrics.active_blocks += group.active;
    metrics.inactive_blocks += group.inactive;
  }
  for (const OwnerId owner : coordinator_.owners()) {
    for (std::size_t g = 0; g < coordinator_.group_count(); ++g) {
      for (const PageId page : coordinator_.table(owner, g)) {
        if (page != coordinator_.null_page()) ++metrics.active_block_refs;
      }
    }
  }
  return metrics;
}

std::span<const UniqueBlock> GroupedBackend::owned_blocks(OwnerId) const {
  throw ContractError(
      "a manager with KV cache groups keeps pages per group, not Dynamo block identities: read block_table(owner, "
      "group)");
}

std::vector<OwnerId> GroupedBackend::owners() const { return coordinator_.owners(); }

bool GroupedBackend::is_cached(SequenceHash hash) const { return coordinator_.is_cached(hash, 0); }

std::size_t GroupedBackend::metadata_bytes() const {
  std::size_t bytes = 0;
  for (const OwnerId owner : coordinator_.owners()) {
    for (std::size_t g = 0; g < coordinator_.group_count(); ++g) bytes += coordinator_.table(owner, g).size_bytes();
  }
  return bytes;
}

std::vector<std::pair<PageId, SequenceHash>> GroupedBackend::registered_blocks() const {
  std::vector<std::pair<PageId, SequenceHash>> out;
  for (const auto& cached : coordinator_.cached_pages()) out.emplace_back(cached.page, cached.hash);
  return out;
}

}  // namespace kvtier::g1
