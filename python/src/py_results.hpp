#pragma once
// The small result types of the Python API, bound as read-only classes.
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::python {

/// A G1Acquire: result is "ready", "capacity_exhausted" or "blocked_on_offload".
struct Acquire {
  std::string result;
  std::size_t count = 0;
  std::uint64_t offload_id = 0;
  double deadline_ms = 0.0;
  static Acquire from(const g1::G1Acquire& acquire);
};

/// One generate(): the signal names ("use", "promote", "deref"), how many were
/// applied, the acquire that ended it, whether the request finished.
struct DecodeStepResult {
  std::vector<std::string> signals;
  std::size_t applied = 0;
  Acquire acquire;
  bool finished = false;
  static DecodeStepResult from(const driver::DecodeStep& step);
};

/// A decode reservation, a destination reservation or prefix pins, consumed by
/// the call that uses it, and only by the manager that made it (`manager_id`).
struct DecodeReservationHandle {
  std::uint64_t manager_id = 0;
  std::optional<g1::DecodeReservation> reservation;
};
struct DestinationReservationHandle {
  std::uint64_t manager_id = 0;
  std::optional<g1::DestinationReservation> reservation;
  nanobind::object request;  // the kvtier.Request it reserves for: activation allocates its prompt
};
struct PrefixPinsHandle {
  std::uint64_t manager_id = 0;
  std::optional<g1::G1PrefixPins> pins;
};

void bind_results(nanobind::module_& module);

}  // namespace kvtier::python
