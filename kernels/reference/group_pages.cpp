#include "kvtier/kernels/group_pages.hpp"

#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::kernels {

void check_group_pages(const GroupPages& pages) {
  try {
    validate_page_format(pages.format, "group pages: ");
  } catch (const ConfigError& error) {
    throw ContractError(error.what());
  }
  if (pages.layers == 0) throw ContractError("group pages: a group has at least one layer");
  if (pages.group_page_bytes() > pages.page_stride) {
    throw ContractError("group pages: " + std::to_string(pages.layers) + " layers of " +
                        std::to_string(pages.format.layer_page_bytes()) + " B do not fit a page of " +
                        std::to_string(pages.page_stride) + " B");
  }
}

}  // namespace kvtier::kernels
