#pragma once
// A model's KV cache as KV cache groups (docs/spec/model-geometry.md,
// sections 1 and 2; vLLM's KVCacheSpec and its page-size unification): each
// group is a kind (full attention, sliding window, chunked local attention,
// MLA, windowed MLA, Mamba state) over some layers, with its block size and
// page format. Resolving the groups gives the one page size every group's
// pages share in one pool — smaller attention pages scale their block size up
// by the quotient, a Mamba page and an attention page that does not divide
// the largest are padded — the hash unit (GCD of the block sizes) and the
// scheduler unit (their LCM), and whether the pool keeps a null page. A model
// with one full-attention group is today's geometry: nothing changes for it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/core/page_format.hpp"

namespace kvtier {

/// vLLM's KVCacheSpecKind, named as vLLM names it everywhere kvtier names a kind.
enum class GroupKind : std::uint8_t {
  FullAttention,
  SlidingWindow,
  ChunkedLocalAttention,
  MlaAttention,
  SlidingWindowMla,
  Mamba,
};
/// "full_attention", "sliding_window", "chunked_local_attention", "mla_attention",
/// "sliding_window_mla" or "mamba".
const char* group_kind_name(GroupKind kind) noexcept;
/// The kind a name says; ConfigError for another.
GroupKind parse_group_kind(std::string_view name);
/// True for the kinds whose blocks hold K and V (not an MLA latent, not a Mamba state).
constexpr bool holds_key_and_value(GroupKind kind) noexcept {
  return kind == GroupKind::FullAttention || kind == GroupKind::SlidingWindow ||
         kind == GroupKind::ChunkedLocalAttention;
}
constexpr bool is_windowed(GroupKind kind) noexcept {
  return kind == GroupKind::SlidingWindow || kind == GroupKind::SlidingWindowMla;
}

/// Which Mamba states are cached: none (one state page a request, nothing
/// reusable), the states the schedule lands on (align), or every block's (all).
enum class MambaMode : std::uint8_t { None, Align, All };
const char* mamba_mode_name(MambaMode mode) noexcept;
MambaMode parse_mamba_mode(std::string_view name);

/// One KV cache group as a model or a caller describes it.
struct GroupSpec {
  GroupKind kind = GroupKind::FullAttention;
  std::uint32_t layers = 1;
  /// Tokens per block; 0: the manager's block size (raised to cover a Mamba
  /// state, or scaled up to the pool's page, when the caller does not fix it).
  std::uint32_t block_size = 0;
  std::uint32_t sliding_window = 0;        // tokens: sliding_window, sliding_window_mla
  std::uint32_t attention_chunk_size = 0;  // tokens: chunked_local_attention
  MambaMode mamba_mode = MambaMode::None;  // mamba
  // K/V kinds: one token's K and V of one layer.
  std::uint32_t kv_heads = 0;
  std::uint32_t head_dim = 0;
  std::uint32_t head_dim_v = 0;  // 0: head_dim
  KvDtype dtype = KvDtype::Bf16;
  // MLA kinds: one latent vector a token a layer.
  std::uint32_t latent_dim = 0;
  std::uint32_t rope_dim = 0;
  /// K/V and MLA kinds: how the page is quantized (page_format.hpp).
  KvQuant quant = KvQuant::None;
  // mamba: the whole recurrent state of one layer at one position, its conv part first.
  std::uint64_t state_bytes = 0;
  std::uint64_t conv_state_bytes = 0;

  /// The page format of one layer's block at `tokens` tokens a block.
  PageFormat format_at(std::uint32_t tokens) const noexcept;
  /// Bytes of one token of one layer (0 for Mamba, whose state does not scale with tokens).
  std::uint64_t token_bytes() const noexcept;
  /// Bytes of one block of every layer of the group at `block_size` tokens.
  std::uint64_t page_bytes_at(std::uint32_t tokens) const noexcept;
};

/// A group as the pool holds it: its block size settled, its page and the
/// pool's (its padded page).
struct ResolvedGroup {
  GroupSpec spec;                       // spec.block_size is set
  std::uint64_t page_bytes = 0;         // unpadded: every layer of the group
  std::uint64_t padded_page_bytes = 0;  // the pool's page
  bool padded() const noexcept { return padded_page_bytes != page_bytes; }
  /// One layer's block as the kernels and tiers address it.
  PageFormat format() const noexcept { return spec.format_at(spec.block_size); }
};

class ModelGeometry {
 public:
  /// Resolves `groups` over a manager of `block_size` tokens (vLLM's
  /// `unify_kv_cache_spec_page_size` and `_align_hybrid_block_size`):
  /// - a group whose block size is 0 takes `block_size`; with a Mamba group
  ///   and `block_size_fixed` false, the attention block size is first raised
  ///   (in multiples of `block_size`) until one attention page covers the
  ///   largest Mamba state;
  /// - the largest group page is the pool's page; a smaller attention page
  ///   that divides it scales its block size by the quotient; any other
  ///   smaller page (a Mamba state, an attention page that does not divide)
  ///   is padded to it (kvtier's kernels read pages through a block stride);
  /// - the hash unit is the GCD of the block sizes, the scheduler unit their
  ///   LCM; `block_size` must divide every group's when it is fixed.
  /// ConfigError naming the group for anything impossible: no group, a field
  /// a kind needs left 0, a field another kind's given, a scheduler unit past 2^20.
  static ModelGeometry resolve(std::vector<GroupSpec> groups, std::uint32_t block_size, bool block_size_fixed = true);
  /// One full-attention group of `geometry`'s layers: today's model.
  static ModelGeometry single(const KvGeometry& geometry);

  const std::vector<ResolvedGroup>& groups() const noexcept { return groups_; }
  std::size_t group_count() const noexcept { return groups_.size(); }
  /// Bytes of one page of the pool: every group's, padding included.
  std::uint64_t page_bytes() const noexcept { return page_bytes_; }
  std::uint32_t hash_block_size() const noexcept { return hash_block_size_; }
  std::uint32_t scheduler_block_size() const noexcept { return scheduler_block_size_; }
  /// More than one group, or a group other than plain full attention (a
  /// quantized one, one with its own V head size): the pool keeps one null
  /// page, never allocated, hashed, freed or counted.
  bool has_null_page() const noexcept { return null_page_; }
  /// What identifies the bytes of one of `group`'s pages wherever a tier
  /// keeps them: its index, kind, block size, layers, window or chunk, and
  /// page format (XXH3). A tier serves a block only into the group whose
  /// fingerprint it was stored with.
  std::uint64_t block_fingerprint(std::size_t group) const;
  /// "full_attention bs16 x32 layers 131072 B; sliding_window(W=128) ... ; hash 16, scheduler 16"
  std::string describe() const;

 private:
  std::vector<ResolvedGroup> groups_;
  std::uint64_t page_bytes_ = 0;
  std::uint32_t hash_block_size_ = 0;
  std::uint32_t scheduler_block_size_ = 0;
  bool null_page_ = false;
};

}  // namespace kvtier
