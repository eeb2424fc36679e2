#include "kvtier/kernels/reference/write_group_kv.hpp"

#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::kernels::reference {
namespace {

void check_write(const GroupPages& pages, PageContent content, std::uint32_t layer, std::size_t tokens,
                 const std::int64_t* slot_mapping, const char* what) {
  check_group_pages(pages);
  if (pages.format.content != content) {
    throw ContractError(std::string(what) + ": the group's pages hold " + pages.format.describe());
  }
  if (layer >= pages.layers)
    throw ContractError(std::string(what) + ": layer " + std::to_string(layer) + " is outside the group");
  for (std::size_t t = 0; t < tokens; ++t) {
    if (slot_mapping[t] >= 0 && static_cast<std::uint64_t>(slot_mapping[t]) >= pages.slots()) {
      throw ContractError(std::string(what) + ": slot " + std::to_string(slot_mapping[t]) + " is outside the pool");
    }
  }
}

}  // namespace

void write_group_kv(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* key, const float* value,
                    std::size_t tokens, const std::int64_t* slot_mapping, LayerScales scales) {
  check_write(pages, PageContent::KeyValue, layer, tokens, slot_mapping, "write_group_kv");
  const PageFormat& f = pages.format;
  const std::size_t key_row = std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Key);
  const std::size_t value_row = std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Value);
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding
    const auto page = static_cast<std::uint32_t>(slot / f.block_size);
    const auto token = static_cast<std::uint32_t>(slot % f.block_size);
    std::byte* block = slab + pages.layer_block_offset(page, layer);
    for (std::uint32_t h = 0; h < f.kv_heads; ++h) {
      store_kv_row(block, f, KvPart::Key, token, h, key + t * key_row + std::size_t{h} * f.head_dim_of(KvPart::Key),
                   scales.key);
      store_kv_row(block, f, KvPart::Value, token, h,
                   value + t * value_row + std::size_t{h} * f.head_dim_of(KvPart::Value), scales.value);
    }
  }
}

void write_mla(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* latent, const float* rope,
               std::size_t tokens, const std::int64_t* slot_mapping, LayerScales scales) {
  check_write(pages, PageContent::MlaLatent, layer, tokens, slot_mapping, "write_mla");
  const PageFormat& f = pages.format;
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    const auto page = static_cast<std::uint32_t>(slot / f.block_size);
    const auto token = static_cast<std::uint32_t>(slot % f.block_size);
    store_mla_token(slab + pages.layer_block_offset(page, layer), f, token, latent + t * f.latent_dim,
                    rope + t * f.rope_dim, scales.key);
  }
}

}  // namespace kvtier::kernels::reference
