// The extension module kvtier._kvtier; python/kvtier/__init__.py re-exports it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/model/model_config.hpp"
#include "kvtier/model/model_presets.hpp"
#include "py_manager.hpp"
#include "py_results.hpp"
#include "python_errors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
void bind_publisher(nb::module_& module);
void bind_row_tiers(nb::module_& module);
void bind_span_pages(nb::module_& module);
void bind_chunk_policy(nb::module_& module);
}  // namespace kvtier::python

NB_MODULE(_kvtier, m) {
  using namespace kvtier::python;
  m.doc() = "kvtier: a real-memory KV-cache block allocator (pages, block tables, KV events)";
  bind_errors(m);
  bind_results(m);
  bind_manager(m);
#if KVTIER_WITH_ZMQ
  bind_publisher(m);
#endif
  bind_row_tiers(m);
  bind_span_pages(m);
  bind_chunk_policy(m);
  m.attr("has_zmq") = bool(KVTIER_WITH_ZMQ);
  m.def("cuda_compiled", &kvtier::memory::cuda_compiled, "Whether this build contains the CUDA runtime.");
  m.def("cuda_device_count", &kvtier::memory::cuda_device_count, "Visible CUDA devices (0 without a CUDA build).");
  m.def(
      "page_pattern",
      [](std::uint64_t identity, std::size_t size, std::uint64_t first_byte) {
        std::string bytes(size, '\0');
        kvtier::fill_page_pattern(identity, first_byte, std::as_writable_bytes(std::span<char>(bytes)));
        return nb::bytes(bytes.data(), bytes.size());
      },
      "identity"_a, "size"_a, "first_byte"_a = 0,
      "The page pattern of `identity` for page bytes [first_byte, first_byte + size): what write_pattern writes.");
  m.def(
      "model_layers",
      [](std::optional<std::string> model_name, std::optional<std::string> model_config) {
        if ((model_name ? 1 : 0) + (model_config ? 1 : 0) != 1) {
          throw kvtier::ConfigError("model_layers: give one of model and model_config");
        }
        const kvtier::model::ModelDescription described =
            model_name ? kvtier::model::preset(*model_name) : kvtier::model::load_model_config(*model_config);
        nb::list places;
        for (const std::optional<kvtier::model::LayerPlace>& place : described.layer_places) {
          places.append(place ? nb::object(nb::make_tuple(place->group, place->index)) : nb::none());
        }
        return places;
      },
      nb::kw_only(), "model"_a = nb::none(), "model_config"_a = nb::none(),
      "Where each of a model's layers keeps its cache in a Manager(model=..., model_config=...): a (group, "
      "layer within the group) pair per model layer, in the model's order (vLLM's grouping), or None for a "
      "layer without a KV cache.");
}
