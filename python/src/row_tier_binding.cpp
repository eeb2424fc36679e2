// kvtier._kvtier.DiskRowTier: G3 as a service of an engine's rows
// (tiers/rows/disk_row_service.hpp), what kvtier.vllm's KvtierDiskTier drives.
// The rows are taken from a writable buffer once, at construction, and the
// buffer export is released at once: the tier holds no export of the
// engine's memory (vLLM's own shutdown releases its memoryview and must not
// fail). Calls that wait (drain, shutdown) release the interpreter lock.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/rows/disk_row_service.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using tiers::rows::DiskRowService;
using tiers::rows::RowJob;
using tiers::rows::RowJobKind;
using tiers::rows::RowRegion;

/// The rows of a 2-D byte buffer (vLLM's primary view: num_chunks x row, strides (row, 1)).
RowRegion rows_of(nb::handle view) {
  Py_buffer buffer{};
  if (PyObject_GetBuffer(view.ptr(), &buffer, PyBUF_WRITABLE | PyBUF_STRIDES) != 0) {
    PyErr_Clear();
    throw ConfigError("the disk tier needs a writable buffer of the engine's rows");
  }
  RowRegion region{};
  std::string why;
  if (buffer.ndim != 2 || buffer.itemsize != 1 || buffer.strides[1] != 1 || buffer.shape[1] > buffer.strides[0] ||
      buffer.strides[0] <= 0) {
    why = "the engine's rows must be a 2-D buffer of bytes, one row per chunk";
  } else {
    region = RowRegion{.base = static_cast<std::byte*>(buffer.buf),
                       .count = static_cast<std::size_t>(buffer.shape[0]),
                       .row_bytes = static_cast<std::size_t>(buffer.strides[0])};
  }
  PyBuffer_Release(&buffer);
  if (!why.empty()) throw ConfigError(why);
  return region;
}

std::vector<std::byte> key_of(nb::handle key) {
  if (!nb::isinstance<nb::bytes>(key)) throw ContractError("an engine key is bytes");
  const auto bytes = nb::borrow<nb::bytes>(key);
  const auto* data = static_cast<const std::byte*>(bytes.data());
  return {data, data + bytes.size()};
}

}  // namespace

void bind_row_tiers(nb::module_& m) {
  nb::class_<DiskRowService>(m, "DiskRowTier",
                             "G3 over an engine's rows: jobs by key, run in place on io_uring (kvtier.vllm).")
      .def(
          "__init__",
          [](DiskRowService* self, nb::handle rows, const std::string& path, std::uint32_t capacity_blocks,
             const std::string& namespace_text, unsigned queue_depth, unsigned backlog, bool sync,
             std::optional<std::string> key_file, bool reformat, bool events) {
            tiers::rows::DiskRowServiceConfig config{
                .store = {.file = path,
                          .slots = capacity_blocks,
                          .queue_depth = queue_depth,
                          .backlog = backlog,
                          .reformat = reformat,
                          .key = key_file ? std::optional(tiers::TierKey::from_file(*key_file)) : std::nullopt,
                          .sync = sync ? tiers::disk::DiskSync::Batch : tiers::disk::DiskSync::None},
                .namespace_text = namespace_text,
                .events = events};
            const RowRegion region = rows_of(rows);
            nb::gil_scoped_release release;  // the restart scan reads every slot's header
            new (self) DiskRowService(config, region);
          },
          "rows"_a, "path"_a, "capacity_blocks"_a, "namespace"_a, "queue_depth"_a = 32, "backlog"_a = 32,
          "sync"_a = false, "key_file"_a = nb::none(), "reformat"_a = false, "events"_a = false)
      .def(
          "lookup", [](DiskRowService& s, nb::handle key) { return s.lookup(key_of(key)); }, "key"_a,
          "Whether the tier holds `key` and can load it now (a hit is a use).")
      .def(
          "submit",
          [](DiskRowService& s, std::uint64_t job_id, bool load, nb::handle keys, std::vector<std::int64_t> rows) {
            RowJob job{.id = job_id, .kind = load ? RowJobKind::Load : RowJobKind::Store};
            for (nb::handle key : keys) job.keys.push_back(key_of(key));
            job.rows = std::move(rows);
            s.submit(std::move(job));
          },
          "job_id"_a, "load"_a, "keys"_a, "rows"_a, "Queues a job of keys[i] in row rows[i]; never waits for I/O.")
      .def(
          "take_finished",
          [](DiskRowService& s) {
            nb::list out;
            for (const tiers::rows::RowJobResult& r : s.take_finished()) {
              nb::list loaded;
              for (std::uint32_t at : r.loaded) loaded.append(at);
              out.append(
                  nb::make_tuple(r.id, r.kind == RowJobKind::Load, r.success, loaded, r.seconds, r.bytes, r.error));
            }
            return out;
          },
          "(job_id, is_load, success, loaded positions, seconds, bytes, error) of each job that ended, once.")
      .def("drain", &DiskRowService::drain, nb::call_guard<nb::gil_scoped_release>(),
           "Waits until every job submitted so far ended.")
      .def("shutdown", &DiskRowService::shutdown, nb::call_guard<nb::gil_scoped_release>(),
           "Ends every job, stops the thread, closes the file; the rows are not touched again.")
      .def(
          "take_events",
          [](DiskRowService& s) {
            nb::list out;
            for (const tiers::rows::RowEvent& e : s.take_events()) {
              out.append(nb::make_tuple(nb::bytes(e.key.data(), e.key.size()), e.removed));
            }
            return out;
          },
          "(key, removed) of each key stored or removed since the last call.")
      .def(
          "counters",
          [](const DiskRowService& s) {
            const tiers::rows::RowTierCounters c = s.counters();
            nb::dict d;
            d["lookups"] = c.lookups;
            d["lookup_hits"] = c.lookup_hits;
            d["keys_stored"] = c.keys_stored;
            d["keys_already_held"] = c.keys_already_held;
            d["keys_store_failed"] = c.keys_store_failed;
            d["keys_loaded"] = c.keys_loaded;
            d["keys_load_failed"] = c.keys_load_failed;
            d["bytes_stored"] = c.bytes_stored;
            d["bytes_loaded"] = c.bytes_loaded;
            d["checksum_failures"] = c.checksum_failures;
            d["authentication_failures"] = c.authentication_failures;
            d["evictions"] = c.evictions;
            d["deadline_misses"] = c.deadline_misses;
            d["used"] = c.used;
            d["capacity"] = c.capacity;
            d["breaker_open"] = c.breaker_open;
            return d;
          },
          "Counters since the tier was opened.")
      .def(
          "recovered",
          [](const DiskRowService& s) {
            const tiers::disk::SlotScan& r = s.recovered();
            nb::dict d;
            d["resident"] = r.resident.size();
            d["corrupt"] = r.corrupt;
            d["unauthenticated"] = r.unauthenticated;
            d["dropped_on_shrink"] = r.dropped_on_shrink;
            d["discarded"] = r.discarded;
            d["reformatted"] = r.reformatted;
            return d;
          },
          "What the tier file held when it was opened.")
      .def_prop_ro("fingerprint", &DiskRowService::fingerprint)
      .def_prop_ro("row_bytes", &DiskRowService::row_bytes)
      .def_prop_ro("capacity", &DiskRowService::capacity)
      .def_prop_ro("direct_io", &DiskRowService::direct_io);
}

}  // namespace kvtier::python
