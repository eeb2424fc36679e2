// kvtier.ZmqEventPublisher: the library's ZMQ publisher (vLLM's wire format,
// docs/events.md) from Python; hand it to Manager(publishers=[...]) and call
// flush() once per scheduler step.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "kvtier/events/zmq_event_publisher.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {

void bind_publisher(nb::module_& module) {
  nb::class_<events::ZmqEventPublisher>(module, "ZmqEventPublisher",
                                        "KV events on a ZMQ PUB socket in vLLM's format, with an optional ROUTER "
                                        "replay socket; a bounded queue feeds a sending thread (drops are counted).")
      .def(
          "__init__",
          [](events::ZmqEventPublisher* self, std::string endpoint, std::string replay_endpoint, std::string topic,
             std::size_t buffer_steps, int hwm, std::size_t max_queue, std::uint32_t data_parallel_rank,
             const std::string& replay_format, const std::string& endpoint_mode, const std::string& encoding,
             std::string medium_g1, std::string medium_g2, std::string medium_g3, std::string medium_g4) {
            new (self) events::ZmqEventPublisher(events::ZmqPublisherConfig{
                .endpoint = std::move(endpoint),
                .replay_endpoint = std::move(replay_endpoint),
                .topic = std::move(topic),
                .buffer_steps = buffer_steps,
                .hwm = hwm,
                .max_queue = max_queue,
                .data_parallel_rank = data_parallel_rank,
                .replay_format = events::parse_replay_format(replay_format),
                .wire = events::VllmWireFormat{.encoding = events::parse_vllm_event_encoding(encoding),
                                               .device_medium = std::move(medium_g1),
                                               .host_medium = std::move(medium_g2),
                                               .disk_medium = std::move(medium_g3),
                                               .external_medium = std::move(medium_g4)},
                .endpoint_mode = events::parse_endpoint_mode(endpoint_mode)});
          },
          "endpoint"_a, nb::kw_only(), "replay_endpoint"_a = "", "topic"_a = "", "buffer_steps"_a = 10000,
          "hwm"_a = 100000, "max_queue"_a = 100000, "data_parallel_rank"_a = 0, "replay_format"_a = "current",
          "endpoint_mode"_a = "auto", "encoding"_a = "map", "medium_g1"_a = "GPU", "medium_g2"_a = "CPU_PINNED",
          "medium_g3"_a = "DISK", "medium_g4"_a = "EXTERNAL",
          "replay_format: 'current' (vLLM PR #45177: replay answers carry the topic frame) or 'pre-45177'; "
          "endpoint_mode: 'auto' (bind a wildcard, ipc:// or local endpoint, connect to a remote host, as vLLM), "
          "'bind' or 'connect'; encoding: 'map' (vLLM's current tagged maps) or 'array' (older tagged arrays); "
          "medium_g1 / medium_g2 / medium_g3: each tier's medium name.")
      // flush() keeps the GIL: the open batch is the allocator thread's, and
      // the GIL is what keeps another Python thread's manager calls out of it.
      .def("flush", &events::ZmqEventPublisher::flush,
           "Queues the events since the last flush as one batch (one scheduler step).")
      .def("drain", &events::ZmqEventPublisher::drain, nb::call_guard<nb::gil_scoped_release>(),
           "Waits until every queued batch was sent.")
      .def_prop_ro("endpoint", &events::ZmqEventPublisher::endpoint,
                   "The bound address (a wildcard port resolved), or the one connected to.")
      .def_prop_ro(
          "endpoint_mode",
          [](const events::ZmqEventPublisher& p) { return std::string(events::endpoint_mode_name(p.endpoint_mode())); },
          "'bind' or 'connect': what the PUB socket did with its endpoint.")
      .def_prop_ro("replay_endpoint", &events::ZmqEventPublisher::replay_endpoint)
      .def("stats", [](const events::ZmqEventPublisher& p) {
        const events::ZmqPublisherStats s = p.stats();
        nb::dict out;
        out["events"] = s.events;
        out["batches_queued"] = s.batches_queued;
        out["batches_dropped"] = s.batches_dropped;
        out["batches_sent"] = s.batches_sent;
        out["replays_served"] = s.replays_served;
        out["replays_abandoned"] = s.replays_abandoned;
        return out;
      });
}

}  // namespace kvtier::python
