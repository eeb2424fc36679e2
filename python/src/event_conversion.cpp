#include "event_conversion.hpp"

#include "kvtier/core/kv_event_json.hpp"

namespace nb = nanobind;

namespace kvtier::python {

nb::object json_to_python(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return nb::none();
    case nlohmann::json::value_t::boolean:
      return nb::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_unsigned:
      return nb::int_(value.get<std::uint64_t>());
    case nlohmann::json::value_t::number_integer:
      return nb::int_(value.get<std::int64_t>());
    case nlohmann::json::value_t::number_float:
      return nb::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return nb::str(value.get_ref<const std::string&>().c_str());
    case nlohmann::json::value_t::array: {
      nb::list list;
      for (const auto& item : value) list.append(json_to_python(item));
      return list;
    }
    case nlohmann::json::value_t::object: {
      nb::dict dict;
      for (auto it = value.begin(); it != value.end(); ++it) dict[it.key().c_str()] = json_to_python(it.value());
      return dict;
    }
    default:
      return nb::none();  // binary and discarded values never occur in events
  }
}

nb::dict event_to_python(const KvEvent& event) { return nb::borrow<nb::dict>(json_to_python(to_json(event))); }

}  // namespace kvtier::python
