#pragma once
// kvtier's exceptions as Python exception types with the library's messages:
// kvtier.Error (base), ContractError, ConfigError (also a ValueError),
// AllocationError (also a MemoryError), TransferError, CudaError, and
// InvariantError (kvtier's own bug; a RuntimeError, not a kvtier.Error).
#include <nanobind/nanobind.h>

namespace kvtier::python {

void bind_errors(nanobind::module_& module);

}  // namespace kvtier::python
