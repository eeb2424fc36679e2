#include "kvtier/memory/runtime.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {

const char* runtime_kind_name(RuntimeKind kind) noexcept { return kind == RuntimeKind::Host ? "host" : "cuda"; }

void check_kv_write(const KvWrite& write) {
  if (write.tokens == 0) return;
  if (write.layout == nullptr || write.slab == nullptr || write.key == nullptr || write.value == nullptr ||
      write.slots == nullptr) {
    throw ContractError("write_kv with a null pointer");
  }
  KVTIER_EXPECTS(write.layer < write.layout->geometry().layers,
                 "write_kv: layer " + std::to_string(write.layer) + " is outside the layout");
}

}  // namespace kvtier::memory
