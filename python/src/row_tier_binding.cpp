// kvtier._kvtier.RowTier: G3 or G4 as a service of an engine's rows
// (tiers/rows/row_service.hpp), what kvtier.vllm's tiers drive, opened by
// open_disk_rows (with liburing) and open_shared_rows (with hiredis).
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
#include "kvtier/tiers/rows/row_service.hpp"
#include "row_counters.hpp"
#include "row_tier_configs.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using tiers::rows::RowJob;
using tiers::rows::RowJobKind;
using tiers::rows::RowRegion;
using tiers::rows::RowService;

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
#if KVTIER_WITH_URING
  m.def(
      "open_disk_rows",
      [](nb::handle rows, const std::string& path, std::uint32_t capacity_blocks, const std::string& namespace_text,
         unsigned queue_depth, unsigned backlog, bool sync, std::optional<std::string> key_file, bool reformat,
         bool events) {
        const tiers::rows::DiskRowsConfig config =
            disk_rows_config(path, capacity_blocks, namespace_text, queue_depth, backlog, sync, key_file, reformat);
        const RowRegion region = rows_of(rows);
        nb::gil_scoped_release release;  // the restart scan reads every slot's header
        return new RowService(tiers::rows::open_disk_rows(config, region), region, events);
      },
      "rows"_a, "path"_a, "capacity_blocks"_a, "namespace"_a, "queue_depth"_a = 32, "backlog"_a = 32, "sync"_a = false,
      "key_file"_a = nb::none(), "reformat"_a = false, "events"_a = false, nb::rv_policy::take_ownership,
      "G3 over the engine's rows (a 2-D writable byte buffer, one row per chunk): one file at `path`.");
#endif
#if KVTIER_WITH_REDIS
  m.def(
      "open_shared_rows",
      [](nb::handle rows, const std::vector<std::string>& urls, const std::string& key_namespace,
         const std::string& namespace_text, unsigned deadline_ms, unsigned retry_after_ms, std::uint32_t ttl_seconds,
         std::optional<std::string> key_file, bool events) {
        const tiers::rows::SharedRowsConfig config =
            shared_rows_config(urls, key_namespace, namespace_text, deadline_ms, retry_after_ms, ttl_seconds, key_file);
        const RowRegion region = rows_of(rows);
        return new RowService(tiers::rows::open_shared_rows(config, region), region, events);
      },
      "rows"_a, "urls"_a, "key_namespace"_a, "namespace"_a, "deadline_ms"_a = 50, "retry_after_ms"_a = 1000,
      "ttl_seconds"_a = 0, "key_file"_a = nb::none(), "events"_a = false, nb::rv_policy::take_ownership,
      "G4 over the engine's rows: one Redis, or any nodes of a Redis Cluster (redis:// URLs).");
#endif
  nb::class_<RowService>(m, "RowTier", "A tier of an engine's rows: jobs by key, run on the tier's own thread.")
      .def(
          "lookup", [](RowService& s, nb::handle key) { return s.lookup(key_of(key)); }, "key"_a,
          "Whether the tier is known to hold `key` and can load it now (a hit is a use); never waits.")
      .def(
          "lookup_many",
          [](RowService& s, nb::handle keys) {
            std::vector<std::vector<std::byte>> asked;
            for (nb::handle key : keys) asked.push_back(key_of(key));
            std::vector<bool> found;
            {
              nb::gil_scoped_release release;
              found = s.lookup_many(asked);
            }
            nb::list out;
            for (const bool f : found) out.append(f);
            return out;
          },
          "keys"_a, "Asks the tier for each key (a remote tier: one round trip within its deadline).")
      .def(
          "submit",
          [](RowService& s, std::uint64_t job_id, bool load, nb::handle keys, std::vector<std::int64_t> rows) {
            RowJob job{.id = job_id, .kind = load ? RowJobKind::Load : RowJobKind::Store};
            for (nb::handle key : keys) job.keys.push_back(key_of(key));
            job.rows = std::move(rows);
            s.submit(std::move(job));
          },
          "job_id"_a, "load"_a, "keys"_a, "rows"_a, "Queues a job of keys[i] in row rows[i]; never waits for I/O.")
      .def(
          "take_finished",
          [](RowService& s) {
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
      .def("drain", &RowService::drain, nb::call_guard<nb::gil_scoped_release>(),
           "Waits until every job submitted so far ended.")
      .def("shutdown", &RowService::shutdown, nb::call_guard<nb::gil_scoped_release>(),
           "Ends every job, stops the thread, closes the file; the rows are not touched again.")
      .def(
          "take_events",
          [](RowService& s) {
            nb::list out;
            for (const tiers::rows::RowEvent& e : s.take_events()) {
              out.append(nb::make_tuple(nb::bytes(e.key.data(), e.key.size()), e.removed));
            }
            return out;
          },
          "(key, removed) of each key stored or removed since the last call.")
      .def(
          "counters", [](const RowService& s) { return row_counters_dict(s.counters()); },
          "Counters since the tier was opened.")
      .def(
          "opened",
          [](const RowService& s) {
            nb::dict d;
            for (const auto& [name, value] : s.opened()) d[name.c_str()] = value;
            return d;
          },
          "What the store found when it was opened (a G3's restart scan).")
      .def_prop_ro("row_bytes", &RowService::row_bytes)
      .def_prop_ro("capacity", &RowService::capacity);
}

}  // namespace kvtier::python
