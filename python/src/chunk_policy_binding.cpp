// kvtier._kvtier.ChunkEviction: kvtier's leaf-first cache orders over an
// engine's chunk slots (g1/chunk_eviction.hpp), what kvtier.vllm's cache
// policies call; and prefix_cache_bound, the offline optimum their
// benchmark sets them against (measure/offline_policies.hpp).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvtier/g1/chunk_eviction.hpp"
#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/prefix_tree_trace.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using g1::ChunkEviction;

g1::ChunkKey hash_of(const nb::bytes& key) {
  return ChunkEviction::key_hash(std::as_bytes(std::span(key.c_str(), key.size())));
}

}  // namespace

void bind_chunk_policy(nb::module_& m) {
  nb::class_<ChunkEviction>(m, "ChunkEviction",
                            "A kvtier leaf-first order over an engine's chunk slots 0..capacity-1 "
                            "(docs/vllm.md, \"kvtier's cache policy\").")
      .def(
          "__init__",
          [](ChunkEviction* self, const std::string& order, std::uint32_t capacity) {
            new (self) ChunkEviction(g1::parse_eviction_backend(order), capacity);
          },
          "order"_a, "capacity"_a, "order: lru2, lfu_da, arc, s3fifo or adaptive.")
      .def(
          "stored",
          [](ChunkEviction& self, std::uint32_t chunk, const nb::bytes& key, const std::optional<nb::bytes>& parent) {
            std::optional<g1::ChunkKey> parent_hash;
            if (parent) parent_hash = hash_of(*parent);
            self.stored(chunk, hash_of(key), parent_hash);
          },
          "chunk"_a, "key"_a, "parent"_a = nb::none(),
          "Slot `chunk` holds `key` (parent: the previous key of its request): its first use.")
      .def(
          "accessed",
          [](ChunkEviction& self, const std::vector<std::uint32_t>& chunks, const nb::bytes& reused) {
            self.accessed(chunks, std::span(reinterpret_cast<const std::uint8_t*>(reused.c_str()), reused.size()));
          },
          "chunks"_a, "reused"_a,
          "The chunks a request touched, in this order (tail first): reused[i] nonzero one more use, zero "
          "recency only.")
      .def("evictable", &ChunkEviction::evictable, "chunk"_a)
      .def("pinned", &ChunkEviction::pinned, "chunk"_a)
      .def("removed", &ChunkEviction::removed, "chunk"_a)
      .def(
          "evict",
          [](ChunkEviction& self, std::size_t n, const std::vector<std::uint32_t>& spared) {
            return self.evict(n, spared);
          },
          "n"_a, "spared"_a, "Exactly n victims (slots), none of `spared`; None, nothing changed, if fewer can go.")
      .def("clear", &ChunkEviction::clear)
      .def("holds", &ChunkEviction::holds, "chunk"_a)
      .def("is_evictable", &ChunkEviction::is_evictable, "chunk"_a)
      .def_prop_ro("evictable_count", &ChunkEviction::evictable_count)
      .def_prop_ro("capacity", &ChunkEviction::capacity)
      .def_prop_ro("order", [](const ChunkEviction& self) { return std::string(eviction_backend_name(self.order())); })
      .def_prop_ro("metadata_bytes", &ChunkEviction::metadata_bytes);

  m.def(
      "prefix_cache_bound",
      [](const std::vector<std::vector<std::uint64_t>>& paths, std::size_t capacity) {
        const measure::PrefixTreeTrace trace = measure::prefix_tree_trace(paths);
        const measure::PolicyHits hits = measure::belady_bound(trace, capacity);
        return std::make_pair(hits.hits, hits.prompt_blocks);
      },
      "paths"_a, "capacity"_a,
      "(hits, prompt blocks) of the offline optimum for a prefix cache of `capacity` blocks "
      "(docs/policies.md): each path a request's block ids, root first, equal ids sharing their prefix.");
}

}  // namespace kvtier::python
