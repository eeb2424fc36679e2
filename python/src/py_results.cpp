#include "py_results.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kvtier/core/move_block.hpp"

namespace nb = nanobind;

namespace kvtier::python {

Acquire Acquire::from(const g1::G1Acquire& acquire) {
  switch (acquire.kind) {
    case g1::G1Acquire::Kind::Ready:
      return Acquire{.result = "ready", .count = acquire.count};
    case g1::G1Acquire::Kind::CapacityExhausted:
      return Acquire{.result = "capacity_exhausted"};
    case g1::G1Acquire::Kind::BlockedOnOffload:
      return Acquire{
          .result = "blocked_on_offload", .offload_id = acquire.offload_id, .deadline_ms = acquire.deadline_ms};
  }
  return Acquire{};
}

DecodeStepResult DecodeStepResult::from(const driver::DecodeStep& step) {
  DecodeStepResult out{.applied = step.applied, .acquire = Acquire::from(step.acquire), .finished = step.finished};
  for (const MoveBlock& signal : step.signals) out.signals.emplace_back(signal_name(signal));
  return out;
}

void bind_results(nb::module_& m) {
  nb::class_<Acquire>(m, "Acquire", "What a Use asked of G1: ready, capacity_exhausted or blocked_on_offload.")
      .def_ro("result", &Acquire::result)
      .def_ro("count", &Acquire::count, "ready: blocks processed")
      .def_ro("offload_id", &Acquire::offload_id, "blocked_on_offload: the swap-out to wait for")
      .def_ro("deadline_ms", &Acquire::deadline_ms, "blocked_on_offload: an estimate of when it ends")
      .def_prop_ro("ready", [](const Acquire& a) { return a.result == "ready"; })
      .def("__bool__", [](const Acquire& a) { return a.result == "ready"; })
      .def("__repr__", [](const Acquire& a) {
        return "Acquire(result='" + a.result + "', count=" + std::to_string(a.count) +
               (a.offload_id ? ", offload_id=" + std::to_string(a.offload_id) : std::string()) + ")";
      });
  nb::class_<DecodeStepResult>(m, "DecodeStep", "What one generate() did.")
      .def_ro("signals", &DecodeStepResult::signals)
      .def_ro("applied", &DecodeStepResult::applied)
      .def_ro("acquire", &DecodeStepResult::acquire)
      .def_prop_ro("result", [](const DecodeStepResult& s) { return s.acquire.result; })
      .def_ro("finished", &DecodeStepResult::finished)
      .def("__repr__", [](const DecodeStepResult& s) {
        return "DecodeStep(result='" + s.acquire.result + "', applied=" + std::to_string(s.applied) +
               ", finished=" + (s.finished ? "True" : "False") + ")";
      });
  nb::class_<g1::PrefillCost>(m, "PrefillCost", "What admitting a request costs (docs/semantics.md §3.7).")
      .def_ro("new_blocks", &g1::PrefillCost::new_blocks)
      .def_ro("new_tokens", &g1::PrefillCost::new_tokens)
      .def_ro("cached_tokens", &g1::PrefillCost::cached_tokens)
      .def_ro("uncached_common_prefix_tokens", &g1::PrefillCost::uncached_common_prefix_tokens)
      .def_ro("active_cached_tokens", &g1::PrefillCost::active_cached_tokens)
      .def("__repr__", [](const g1::PrefillCost& c) {
        return "PrefillCost(new_blocks=" + std::to_string(c.new_blocks) +
               ", new_tokens=" + std::to_string(c.new_tokens) + ", cached_tokens=" + std::to_string(c.cached_tokens) +
               ", active_cached_tokens=" + std::to_string(c.active_cached_tokens) + ")";
      });
  nb::class_<DecodeReservationHandle>(m, "DecodeReservation",
                                      "Capacity promised for decode growth (consumed by release_decode).")
      .def_prop_ro("live", [](const DecodeReservationHandle& h) { return h.reservation.has_value(); });
  nb::class_<DestinationReservationHandle>(m, "DestinationReservation",
                                           "A disaggregated request's destination blocks (activate or cancel it once).")
      .def_prop_ro("live", [](const DestinationReservationHandle& h) { return h.reservation.has_value(); })
      .def_prop_ro("transferable_prompt_tokens", [](const DestinationReservationHandle& h) {
        return h.reservation ? h.reservation->transferable_prompt_tokens : std::size_t{0};
      });
  nb::class_<PrefixPinsHandle>(m, "PrefixPins", "A pinned G1 prefix (release it, or hand it to swap_in).")
      .def_prop_ro("live", [](const PrefixPinsHandle& h) { return h.pins.has_value(); })
      .def_prop_ro("blocks", [](const PrefixPinsHandle& h) { return h.pins ? h.pins->blocks : std::size_t{0}; });
}

}  // namespace kvtier::python
