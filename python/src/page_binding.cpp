// kvtier.Manager's pages: block tables, and zero-copy DLPack views of the
// slab's K/V and of each KV cache group's pages.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "dlpack_views.hpp"
#include "group_views.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "py_manager.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {

void bind_page_calls(nb::class_<PyManager>& c) {
  c.def(
       "block_table",
       [](PyManager& m, nb::handle owner, std::size_t group) {
         return host_block_table(m.manager().block_table(existing_owner(m, owner), group));
       },
       "owner"_a, "group"_a = 0,
       "The physical page ids of a request's (or an owner's) blocks in KV cache group `group`, in order: a 1-D int32 "
       "numpy array (a copy). Where a group no longer needs a position it holds the null page (Manager.null_page).")
      .def(
          "block_tables",
          [](PyManager& m, std::vector<nb::handle> owners, std::optional<std::uint32_t> max_blocks, std::size_t group) {
            // A table holds distinct pages: one wider than the pool is padding only.
            if (max_blocks && *max_blocks > m.manager().max_capacity()) {
              throw nb::value_error(("max_blocks " + std::to_string(*max_blocks) + " is more than the pool's " +
                                     std::to_string(m.manager().max_capacity()) + " pages: no table can be that long")
                                        .c_str());
            }
            std::vector<std::span<const PageId>> tables;
            std::size_t longest = 0;
            for (nb::handle owner : owners) {
              tables.push_back(m.manager().block_table(existing_owner(m, owner), group));
              longest = std::max(longest, tables.back().size());
            }
            return block_table_tensor(
                m.session().runtime(), tables,
                max_blocks.value_or(static_cast<std::uint32_t>(std::max<std::size_t>(longest, 1))));
          },
          "owners"_a, "max_blocks"_a = nb::none(), "group"_a = 0,
          "The padded [len(owners), max_blocks] int32 block tables (-1 padding) in the runtime's device memory, as a "
          "DLPack tensor a paged-attention kernel reads (torch.from_dlpack on CUDA, numpy on the host runtime).")
      .def(
          "kv_cache",
          [](PyManager& m, std::uint32_t layer, bool as_bytes) -> nb::object {
            const auto memory = m.session().page_memory();
            if (m.manager().has_groups()) {
              // Layers count in group order: group 0's, then group 1's, ...
              const auto& groups = m.manager().geometry()->groups();
              std::uint32_t first = 0;
              for (std::size_t g = 0; g < groups.size(); first += groups[g++].spec.layers) {
                if (layer >= first + groups[g].spec.layers) continue;
                const nb::dict views = group_views(memory, m.session().stack().group_pages(g), layer - first);
                const bool plain =
                    groups[g].format().content == PageContent::KeyValue && groups[g].format().quant == KvQuant::None;
                if (plain && !as_bytes) return nb::make_tuple(views["key"], views["value"]);
                return views;
              }
              throw ContractError("layer " + std::to_string(layer) + " is outside the groups' " +
                                  std::to_string(first) + " layers");
            }
            return nb::cast(std::make_pair(kv_view(memory, layer, KvPart::Key, as_bytes),
                                           kv_view(memory, layer, KvPart::Value, as_bytes)));
          },
          "layer"_a, "as_bytes"_a = false,
          "(K, V) of one layer over the real G1 slab, no copy: shape [pages, block_size, kv_heads, head_dim], "
          "strides from the page layout, the layout's dtype (fp8 as uint8); as_bytes=True gives uint8 with the last "
          "dimension in bytes. The views keep the pages alive, also after close(). A manager with KV cache groups "
          "counts layers in group order and answers (K, V) for plain K/V, else group_cache's dict.")
      .def(
          "group_cache",
          [](PyManager& m, std::size_t group, std::uint32_t layer) {
            return group_views(m.session().page_memory(), m.session().stack().group_pages(group), layer);
          },
          "group"_a, "layer"_a,
          "Views of one layer of KV cache group `group` in its page format, no copy, leading dimension the pool's "
          "pages: {'key', 'value'} (+ 'key_scale', 'value_scale' for per-token-head fp32 and NVFP4 e4m3 scales), "
          "{'latent', 'rope'} (+ 'latent_scale' for fp8_ds_mla), or {'conv', 'recurrent'} bytes of a Mamba state. "
          "fp8, int8 data, packed e2m1 pairs and e4m3 scales are uint8 (int8 as int8). Needs the model's real pages "
          "(no group_page_bytes).")
      .def(
          "write_pattern",
          [](PyManager& m, nb::handle owner) {
            const g1::OwnerId id = existing_owner(m, owner);
            const auto pages = m.manager().block_table(id);
            m.session().pool().fill_pattern(pages, m.session().pattern_identities(id));
            std::vector<std::uint32_t> out;
            for (PageId page : pages) out.push_back(page.value());
            return out;
          },
          "owner"_a, "Writes each block's page pattern (pattern_identity) into its page; returns the pages written.")
      .def(
          "verify",
          [](PyManager& m, nb::handle owner) {
            const g1::OwnerId id = existing_owner(m, owner);
            const auto pages = m.manager().block_table(id);
            std::vector<std::uint32_t> out;
            for (PageId page : m.session().pool().find_pattern_mismatches(pages, m.session().pattern_identities(id))) {
              out.push_back(page.value());
            }
            return out;
          },
          "owner"_a, "The owner's pages whose bytes differ from their block's page pattern (empty: all intact).")
      .def(
          "read_page",
          [](PyManager& m, std::uint32_t page) {
            std::string bytes;
            const PageId id(page);
            m.session().pool().read_pages(std::span<const PageId>(&id, 1),
                                          [&](std::size_t, std::span<const std::byte> b) {
                                            bytes.assign(reinterpret_cast<const char*>(b.data()), b.size());
                                          });
            return nb::bytes(bytes.data(), bytes.size());
          },
          "page"_a, "A copy of one page's bytes in logical order [layer][K|V][token][head][dim].")
      .def_static(
          "pattern_identity",
          [](nb::handle block) { return session::Session::pattern_identity(block_from_python(block)); }, "block"_a,
          "The identity whose page pattern write_pattern writes for a block (int hash or uuid.UUID).");
}

}  // namespace kvtier::python
