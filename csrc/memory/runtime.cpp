#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

const char* runtime_kind_name(RuntimeKind kind) noexcept { return kind == RuntimeKind::Host ? "host" : "cuda"; }

}  // namespace kvtier::memory
