#pragma once
// KV events as Python dicts: the same fields and names `kvtier script` prints
// (docs/spec/script-format.md), so a Python program and a script see one format.
#include <nanobind/nanobind.h>

#include <nlohmann/json.hpp>

#include "kvtier/core/kv_event.hpp"

namespace kvtier::python {

/// A JSON value as Python objects (dict, list, int, float, str, bool, None).
nanobind::object json_to_python(const nlohmann::ordered_json& value);
nanobind::dict event_to_python(const KvEvent& event);

}  // namespace kvtier::python
