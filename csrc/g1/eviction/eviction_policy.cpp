#include "kvtier/g1/eviction_policy.hpp"

#include <string>
#include <utility>

#include "g1/eviction/adaptive_eviction_policy.hpp"
#include "g1/eviction/arc_eviction_policy.hpp"
#include "g1/eviction/lfu_da_eviction_policy.hpp"
#include "g1/eviction/lineage_eviction_policy.hpp"
#include "g1/eviction/lru2_eviction_policy.hpp"
#include "g1/eviction/lru_eviction_policy.hpp"
#include "g1/eviction/multi_lru_eviction_policy.hpp"
#include "g1/eviction/s3_fifo_eviction_policy.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

void EvictionPolicy::check_insertable(std::span<const PositionalLineageHash> plhs) const {
  if (auto refusal = insert_refusal(plhs)) throw ContractError(std::move(*refusal));
}

const char* eviction_backend_name(EvictionBackend backend) noexcept {
  switch (backend) {
    case EvictionBackend::Lineage:
      return "lineage";
    case EvictionBackend::Lru:
      return "lru";
    case EvictionBackend::MultiLru:
      return "multi_lru";
    case EvictionBackend::Lru2:
      return "lru2";
    case EvictionBackend::LfuDa:
      return "lfu_da";
    case EvictionBackend::Arc:
      return "arc";
    case EvictionBackend::S3Fifo:
      return "s3fifo";
    case EvictionBackend::Adaptive:
      return "adaptive";
  }
  return "?";
}

EvictionBackend parse_eviction_backend(std::string_view name) {
  for (EvictionBackend backend :
       {EvictionBackend::Lineage, EvictionBackend::Lru, EvictionBackend::MultiLru, EvictionBackend::Lru2,
        EvictionBackend::LfuDa, EvictionBackend::Arc, EvictionBackend::S3Fifo, EvictionBackend::Adaptive}) {
    if (name == eviction_backend_name(backend)) return backend;
  }
  throw ConfigError("unknown eviction backend '" + std::string(name) +
                    "' (expected lineage, lru, multi_lru, lru2, lfu_da, arc, s3fifo or adaptive)");
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionBackend backend, std::uint32_t capacity) {
  switch (backend) {
    case EvictionBackend::Lru:
      return std::make_unique<LruEvictionPolicy>(capacity);
    case EvictionBackend::MultiLru:
      return std::make_unique<MultiLruEvictionPolicy>(capacity);
    case EvictionBackend::Lru2:
      return std::make_unique<Lru2EvictionPolicy>(capacity);
    case EvictionBackend::LfuDa:
      return std::make_unique<LfuDaEvictionPolicy>(capacity);
    case EvictionBackend::Arc:
      return std::make_unique<ArcEvictionPolicy>(capacity);
    case EvictionBackend::S3Fifo:
      return std::make_unique<S3FifoEvictionPolicy>(capacity);
    case EvictionBackend::Adaptive:
      return std::make_unique<AdaptiveEvictionPolicy>(capacity);
    case EvictionBackend::Lineage:
      break;
  }
  return std::make_unique<LineageEvictionPolicy>(capacity);
}

}  // namespace kvtier::g1
