#include "kvtier/core/model_geometry.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include <xxhash.h>

#include "kvtier/core/checked_arithmetic.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier {
namespace {

constexpr std::uint64_t kMaxSchedulerBlockSize = std::uint64_t{1} << 20;

constexpr GroupKind kKinds[] = {GroupKind::FullAttention, GroupKind::SlidingWindow,    GroupKind::ChunkedLocalAttention,
                                GroupKind::MlaAttention,  GroupKind::SlidingWindowMla, GroupKind::Mamba};
constexpr MambaMode kMambaModes[] = {MambaMode::None, MambaMode::Align, MambaMode::All};

/// Every field a kind needs is set, every field of another kind is left 0.
void validate(const GroupSpec& g, std::size_t index) {
  const auto bad = [&](const std::string& why) {
    return ConfigError("KV cache group " + std::to_string(index) + " (" + group_kind_name(g.kind) + "): " + why);
  };
  if (g.layers == 0) throw bad("needs at least one layer");
  if (g.block_size > kMaxSchedulerBlockSize) throw bad("a block size of at most 2^20 tokens");
  const bool kv = holds_key_and_value(g.kind);
  const bool mla = g.kind == GroupKind::MlaAttention || g.kind == GroupKind::SlidingWindowMla;
  const bool mamba = g.kind == GroupKind::Mamba;
  if (kv && (g.kv_heads == 0 || g.head_dim == 0)) throw bad("needs kv_heads and head_dim");
  if (!kv && (g.kv_heads != 0 || g.head_dim != 0 || g.head_dim_v != 0)) {
    throw bad("kv_heads and head_dim belong to K/V attention groups");
  }
  if (mla && g.latent_dim == 0) throw bad("needs latent_dim");
  if (!mla && (g.latent_dim != 0 || g.rope_dim != 0)) throw bad("latent_dim and rope_dim belong to MLA groups");
  if (mamba && g.state_bytes == 0) throw bad("needs state_bytes");
  if (!mamba && g.state_bytes != 0) throw bad("state_bytes belongs to Mamba groups");
  if (!mamba && g.mamba_mode != MambaMode::None) throw bad("mamba_mode belongs to Mamba groups");
  if (is_windowed(g.kind) && g.sliding_window == 0) throw bad("needs sliding_window > 0");
  if (!is_windowed(g.kind) && g.sliding_window != 0) throw bad("sliding_window belongs to windowed groups");
  if (g.kind == GroupKind::ChunkedLocalAttention && g.attention_chunk_size == 0) {
    throw bad("needs attention_chunk_size > 0");
  }
  if (g.kind != GroupKind::ChunkedLocalAttention && g.attention_chunk_size != 0) {
    throw bad("attention_chunk_size belongs to chunked local attention groups");
  }
  if (!mamba && g.conv_state_bytes != 0) throw bad("conv_state_bytes belongs to Mamba groups");
  validate_page_format(g.format_at(std::max<std::uint32_t>(g.block_size, 1)),
                       "KV cache group " + std::to_string(index) + " (" + group_kind_name(g.kind) + "): ");
}

}  // namespace

const char* group_kind_name(GroupKind kind) noexcept {
  switch (kind) {
    case GroupKind::FullAttention:
      return "full_attention";
    case GroupKind::SlidingWindow:
      return "sliding_window";
    case GroupKind::ChunkedLocalAttention:
      return "chunked_local_attention";
    case GroupKind::MlaAttention:
      return "mla_attention";
    case GroupKind::SlidingWindowMla:
      return "sliding_window_mla";
    case GroupKind::Mamba:
      return "mamba";
  }
  return "?";
}

GroupKind parse_group_kind(std::string_view name) {
  for (const GroupKind kind : kKinds) {
    if (name == group_kind_name(kind)) return kind;
  }
  throw ConfigError("unknown KV cache group kind '" + std::string(name) +
                    "' (full_attention, sliding_window, chunked_local_attention, mla_attention, sliding_window_mla, "
                    "mamba)");
}

const char* mamba_mode_name(MambaMode mode) noexcept {
  switch (mode) {
    case MambaMode::None:
      return "none";
    case MambaMode::Align:
      return "align";
    case MambaMode::All:
      return "all";
  }
  return "?";
}

MambaMode parse_mamba_mode(std::string_view name) {
  for (const MambaMode mode : kMambaModes) {
    if (name == mamba_mode_name(mode)) return mode;
  }
  throw ConfigError("unknown mamba_mode '" + std::string(name) + "' (none, align, all)");
}

PageFormat GroupSpec::format_at(std::uint32_t tokens) const noexcept {
  PageFormat f{.block_size = tokens, .dtype = dtype, .quant = quant};
  if (holds_key_and_value(kind)) {
    f.content = PageContent::KeyValue;
    f.kv_heads = kv_heads;
    f.head_dim = head_dim;
    f.head_dim_v = head_dim_v;
  } else if (kind == GroupKind::Mamba) {
    f.content = PageContent::MambaState;
    f.state_bytes = state_bytes;
    f.conv_state_bytes = conv_state_bytes;
  } else {
    f.content = PageContent::MlaLatent;
    f.latent_dim = latent_dim;
    f.rope_dim = rope_dim;
  }
  return f;
}

std::uint64_t GroupSpec::token_bytes() const noexcept { return format_at(1).token_bytes(); }

std::uint64_t GroupSpec::page_bytes_at(std::uint32_t tokens) const noexcept {
  if (kind == GroupKind::Mamba) return std::uint64_t{layers} * state_bytes;
  return std::uint64_t{layers} * tokens * token_bytes();
}

ModelGeometry ModelGeometry::single(const KvGeometry& geometry) {
  return resolve({GroupSpec{.kind = GroupKind::FullAttention,
                            .layers = geometry.layers,
                            .block_size = geometry.tokens_per_block,
                            .kv_heads = geometry.kv_heads,
                            .head_dim = geometry.head_dim,
                            .dtype = geometry.dtype}},
                 geometry.tokens_per_block);
}

ModelGeometry ModelGeometry::resolve(std::vector<GroupSpec> groups, std::uint32_t block_size, bool block_size_fixed) {
  if (groups.empty()) throw ConfigError("a model needs at least one KV cache group");
  if (block_size == 0) throw ConfigError("the manager's block size must be at least 1 token");
  for (std::size_t i = 0; i < groups.size(); ++i) validate(groups[i], i);
  const auto is_mamba = [](const GroupSpec& g) { return g.kind == GroupKind::Mamba; };

  // The attention block size: the manager's, raised (in its multiples) until
  // one attention page covers the largest Mamba state when the caller let it.
  std::uint64_t attention_block = block_size;
  std::uint64_t largest_state = 0;
  std::uint64_t largest_token = 0;
  for (const GroupSpec& g : groups) {
    if (is_mamba(g)) largest_state = std::max(largest_state, g.page_bytes_at(0));
    if (!is_mamba(g)) largest_token = std::max(largest_token, std::uint64_t{g.layers} * g.token_bytes());
  }
  if (!block_size_fixed && largest_state > 0 && largest_token > 0) {
    attention_block = std::max<std::uint64_t>(
        block_size, block_size * ceil_div(largest_state, std::uint64_t{block_size} * largest_token));
    if (attention_block > kMaxSchedulerBlockSize) {
      throw ConfigError("an attention page covering the Mamba state of " + std::to_string(largest_state) +
                        " bytes needs blocks of " + std::to_string(attention_block) + " tokens (at most 2^20)");
    }
  }
  ModelGeometry out;
  for (GroupSpec& g : groups) {
    if (g.block_size == 0) g.block_size = static_cast<std::uint32_t>(attention_block);
    out.groups_.push_back(ResolvedGroup{.spec = g, .page_bytes = g.page_bytes_at(g.block_size)});
  }
  // One page for every group: the largest; smaller attention pages that divide it scale up their blocks.
  for (const ResolvedGroup& g : out.groups_) out.page_bytes_ = std::max(out.page_bytes_, g.page_bytes);
  if (out.page_bytes_ == 0) throw ConfigError("every KV cache group has an empty page");
  for (std::size_t i = 0; i < out.groups_.size(); ++i) {
    ResolvedGroup& g = out.groups_[i];
    const bool scalable = !is_mamba(g.spec) && g.page_bytes > 0 && out.page_bytes_ % g.page_bytes == 0;
    if (scalable && g.page_bytes < out.page_bytes_) {
      const std::uint64_t scaled = std::uint64_t{g.spec.block_size} * (out.page_bytes_ / g.page_bytes);
      if (scaled > kMaxSchedulerBlockSize) {
        throw ConfigError("KV cache group " + std::to_string(i) + " would need blocks of " + std::to_string(scaled) +
                          " tokens to fill the pool's page (at most 2^20)");
      }
      g.spec.block_size = static_cast<std::uint32_t>(scaled);
      g.page_bytes = out.page_bytes_;
    }
    g.padded_page_bytes = out.page_bytes_;
  }
  std::uint64_t hash = 0;
  std::uint64_t scheduler = 1;
  for (std::size_t i = 0; i < out.groups_.size(); ++i) {
    const std::uint32_t bs = out.groups_[i].spec.block_size;
    if (block_size_fixed && bs % block_size != 0) {
      throw ConfigError("KV cache group " + std::to_string(i) + "'s block size " + std::to_string(bs) +
                        " is not a multiple of the manager's " + std::to_string(block_size) +
                        " (the unit sequences are hashed in)");
    }
    hash = std::gcd(hash, std::uint64_t{bs});
    scheduler = std::lcm(scheduler, std::uint64_t{bs});
    if (scheduler > kMaxSchedulerBlockSize) {
      throw ConfigError("the KV cache groups' block sizes have a least common multiple past 2^20 tokens");
    }
  }
  out.hash_block_size_ = static_cast<std::uint32_t>(block_size_fixed ? block_size : hash);
  out.scheduler_block_size_ = static_cast<std::uint32_t>(scheduler);
  // One plain full-attention group is today's manager (KvLayout pages); a
  // quantized one or one with its own V head size is a group with its format.
  const GroupSpec& first = out.groups_.front().spec;
  const bool plain = first.quant == KvQuant::None && (first.head_dim_v == 0 || first.head_dim_v == first.head_dim);
  out.null_page_ = out.groups_.size() > 1 || first.kind != GroupKind::FullAttention || !plain;
  return out;
}

std::uint64_t ModelGeometry::block_fingerprint(std::size_t group) const {
  KVTIER_EXPECTS(group < groups_.size(), "group ", group, " is not one of the ", groups_.size(), " groups");
  const GroupSpec& spec = groups_[group].spec;
  const std::uint64_t fields[] = {1,  // the fingerprint's own version
                                  group,
                                  static_cast<std::uint64_t>(spec.kind),
                                  spec.block_size,
                                  spec.layers,
                                  spec.sliding_window,
                                  spec.attention_chunk_size,
                                  groups_[group].padded_page_bytes,
                                  groups_[group].format().fingerprint()};
  return XXH3_64bits(fields, sizeof(fields));
}

std::string ModelGeometry::describe() const {
  std::ostringstream out;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const GroupSpec& g = groups_[i].spec;
    out << (i == 0 ? "" : "; ") << group_kind_name(g.kind);
    if (is_windowed(g.kind)) out << "(W=" << g.sliding_window << ")";
    if (g.kind == GroupKind::ChunkedLocalAttention) out << "(C=" << g.attention_chunk_size << ")";
    if (g.kind == GroupKind::Mamba) out << "(" << mamba_mode_name(g.mamba_mode) << ")";
    if (g.quant != KvQuant::None) out << " " << kv_quant_name(g.quant);
    out << " x" << g.layers << " layers, bs " << g.block_size << ", " << groups_[i].page_bytes << " B";
    if (groups_[i].padded()) out << " padded to " << groups_[i].padded_page_bytes << " B";
  }
  out << "; page " << page_bytes_ << " B, hash unit " << hash_block_size_ << ", scheduler unit "
      << scheduler_block_size_ << (null_page_ ? ", a null page" : "");
  return out.str();
}

}  // namespace kvtier
