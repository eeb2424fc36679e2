// Manager(groups=..., model=..., model_config=..., kv_cache_dtype=...): the
// KV cache groups a Python caller describes, as the script's init and the
// CLI's --model read them.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/model/group_specs.hpp"
#include "kvtier/model/model_config.hpp"
#include "kvtier/model/model_presets.hpp"
#include "py_manager.hpp"

namespace nb = nanobind;

namespace kvtier::python {

std::vector<GroupSpec> groups_from_python(const std::optional<nb::list>& groups,
                                          const std::optional<std::string>& model_name,
                                          const std::optional<std::string>& model_config,
                                          const std::optional<std::string>& kv_cache_dtype, const KvGeometry& layout) {
  if ((groups ? 1 : 0) + (model_name ? 1 : 0) + (model_config ? 1 : 0) > 1) {
    throw ConfigError("groups, model and model_config each describe the KV cache groups: give one of them");
  }
  if (kv_cache_dtype && !model_name && !model_config) {
    throw ConfigError("kv_cache_dtype sets a model's page format: it needs model or model_config");
  }
  if (model_name || model_config) {
    const model::ModelDescription described =
        model_name ? model::preset(*model_name) : model::load_model_config(*model_config);
    return kv_cache_dtype ? model::with_kv_cache_dtype(described, *kv_cache_dtype).groups : described.groups;
  }
  if (!groups) return {};
  const std::string text = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(*groups));
  return model::parse_group_specs(nlohmann::json::parse(text), layout);
}

}  // namespace kvtier::python
