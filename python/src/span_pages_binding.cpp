// kvtier._kvtier.PageTier: G3 or G4 over pages an engine keeps as several
// spans of its own memory (tiers/rows/span_pages.hpp), what kvtier.sglang's
// HiCache backend drives; opened by open_disk_pages (with liburing) and
// open_shared_pages (with hiredis). Spans come as addresses and sizes (what
// SGLang's host pool's get_page_buffer_meta gives); each must lie in the
// memory registered at opening, or the call is refused before any byte
// moves. Every call that may wait releases the interpreter lock: the I/O runs
// on the tier's C++ thread.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/rows/span_pages.hpp"
#include "row_counters.hpp"
#include "row_tier_configs.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using tiers::rows::MemorySpan;
using tiers::rows::RowRegion;
using tiers::rows::RowStore;
using tiers::rows::SpanPagesConfig;
using tiers::rows::SpanPageTier;
using Keys = std::vector<std::vector<std::byte>>;

Keys keys_of(nb::handle keys) {
  Keys out;
  for (nb::handle key : keys) {
    if (!nb::isinstance<nb::bytes>(key)) throw ContractError("a page key is bytes");
    const auto bytes = nb::borrow<nb::bytes>(key);
    const auto* data = static_cast<const std::byte*>(bytes.data());
    out.emplace_back(data, data + bytes.size());
  }
  return out;
}

std::vector<MemorySpan> spans_of(const std::vector<std::uintptr_t>& addresses, const std::vector<std::size_t>& sizes) {
  if (addresses.size() != sizes.size()) throw ContractError("span addresses and sizes of other lengths");
  std::vector<MemorySpan> spans;
  spans.reserve(addresses.size());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    spans.push_back(MemorySpan{.data = reinterpret_cast<std::byte*>(addresses[i]), .bytes = sizes[i]});
  }
  return spans;
}

SpanPagesConfig pages_config(const std::vector<std::size_t>& span_bytes,
                             const std::vector<std::pair<std::uintptr_t, std::size_t>>& memory,
                             std::size_t staging_pages, bool remote) {
  SpanPagesConfig config{.span_bytes = span_bytes, .staging_pages = staging_pages, .remote = remote};
  for (const auto& [address, bytes] : memory) {
    config.memory.push_back(MemorySpan{.data = reinterpret_cast<std::byte*>(address), .bytes = bytes});
  }
  return config;
}

}  // namespace

void bind_span_pages(nb::module_& m) {
#if KVTIER_WITH_URING
  m.def(
      "open_disk_pages",
      [](const std::vector<std::size_t>& span_bytes, const std::vector<std::pair<std::uintptr_t, std::size_t>>& memory,
         const std::string& path, std::uint32_t capacity_blocks, const std::string& namespace_text,
         std::size_t staging_pages, unsigned queue_depth, unsigned backlog, bool sync,
         std::optional<std::string> key_file, bool reformat) {
        const tiers::rows::DiskRowsConfig disk =
            disk_rows_config(path, capacity_blocks, namespace_text, queue_depth, backlog, sync, key_file, reformat);
        const SpanPagesConfig config = pages_config(span_bytes, memory, staging_pages, false);
        nb::gil_scoped_release release;  // the restart scan reads every slot's header
        return new SpanPageTier(config, [&](const RowRegion& region) { return open_disk_rows(disk, region); });
      },
      "span_bytes"_a, "memory"_a, "path"_a, "capacity_blocks"_a, "namespace"_a, "staging_pages"_a = 32,
      "queue_depth"_a = 32, "backlog"_a = 32, "sync"_a = false, "key_file"_a = nb::none(), "reformat"_a = false,
      nb::rv_policy::take_ownership,
      "G3 over pages of `span_bytes` spans inside `memory` ((address, bytes) buffers): one file at `path`.");
#endif
#if KVTIER_WITH_REDIS
  m.def(
      "open_shared_pages",
      [](const std::vector<std::size_t>& span_bytes, const std::vector<std::pair<std::uintptr_t, std::size_t>>& memory,
         const std::vector<std::string>& urls, const std::string& key_namespace, const std::string& namespace_text,
         std::size_t staging_pages, unsigned deadline_ms, unsigned retry_after_ms, std::uint32_t ttl_seconds,
         std::optional<std::string> key_file) {
        const tiers::rows::SharedRowsConfig shared =
            shared_rows_config(urls, key_namespace, namespace_text, deadline_ms, retry_after_ms, ttl_seconds, key_file);
        const SpanPagesConfig config = pages_config(span_bytes, memory, staging_pages, true);
        return new SpanPageTier(config, [&](const RowRegion& region) { return open_shared_rows(shared, region); });
      },
      "span_bytes"_a, "memory"_a, "urls"_a, "key_namespace"_a, "namespace"_a, "staging_pages"_a = 32,
      "deadline_ms"_a = 50, "retry_after_ms"_a = 1000, "ttl_seconds"_a = 0, "key_file"_a = nb::none(),
      nb::rv_policy::take_ownership, "G4 over pages of spans: one Redis, or any nodes of a Redis Cluster.");
#endif
  nb::class_<SpanPageTier>(m, "PageTier", "A tier of an engine's pages of spans: synchronous, thread safe.")
      .def(
          "present",
          [](SpanPageTier& t, nb::handle keys) {
            const Keys asked = keys_of(keys);
            nb::gil_scoped_release release;
            return t.present(asked);
          },
          "keys"_a, "Of `keys`, those the tier holds (G4: one round trip within its deadline).")
      .def(
          "store",
          [](SpanPageTier& t, nb::handle keys, const std::vector<std::uintptr_t>& addresses,
             const std::vector<std::size_t>& sizes) {
            const Keys stored = keys_of(keys);
            const std::vector<MemorySpan> spans = spans_of(addresses, sizes);
            nb::gil_scoped_release release;
            return t.store(stored, spans);
          },
          "keys"_a, "addresses"_a, "sizes"_a,
          "Writes page i (spans i * spans_per_page ...) under keys[i]; per page, whether the tier holds it.")
      .def(
          "load",
          [](SpanPageTier& t, nb::handle keys, const std::vector<std::uintptr_t>& addresses,
             const std::vector<std::size_t>& sizes) {
            const Keys loaded = keys_of(keys);
            const std::vector<MemorySpan> spans = spans_of(addresses, sizes);
            nb::gil_scoped_release release;
            return t.load(loaded, spans);
          },
          "keys"_a, "addresses"_a, "sizes"_a, "Reads keys[i] into page i's spans; per page, whether they verified.")
      .def(
          "note_uses", [](SpanPageTier& t, nb::handle keys, bool demote) { t.note_uses(keys_of(keys), demote); },
          "keys"_a, "demote"_a = false,
          "Uses of `keys` in this order (the last the most recent), or, with demote, pages evicted first.")
      .def(
          "counters", [](const SpanPageTier& t) { return row_counters_dict(t.service().counters()); },
          "Counters since the tier was opened.")
      .def(
          "opened",
          [](const SpanPageTier& t) {
            nb::dict d;
            for (const auto& [name, value] : t.service().opened()) d[name.c_str()] = value;
            return d;
          },
          "What the store found when it was opened (a G3's restart scan).")
      .def("shutdown", &SpanPageTier::shutdown, nb::call_guard<nb::gil_scoped_release>(),
           "Ends the tier's thread and closes its store; later calls fail.")
      .def_prop_ro("page_bytes", &SpanPageTier::page_bytes)
      .def_prop_ro("spans_per_page", &SpanPageTier::spans_per_page)
      .def_prop_ro("capacity", [](const SpanPageTier& t) { return t.service().capacity(); });
}

}  // namespace kvtier::python
