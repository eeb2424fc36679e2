#pragma once
// The two checks every layer uses: a caller's contract (ContractError with the
// message) and kvtier's own invariants (InvariantError naming file and line).
#include <string>

#include "kvtier/core/errors.hpp"

/// Refuses the call with ContractError(message) unless `condition` holds.
#define KVTIER_EXPECTS(condition, message)                           \
  do {                                                               \
    if (!(condition)) throw ::kvtier::ContractError(message);        \
  } while (false)

/// Throws InvariantError unless `condition` holds: kvtier's own bug.
#define KVTIER_ASSERT(condition, message)                                                            \
  do {                                                                                               \
    if (!(condition)) {                                                                              \
      throw ::kvtier::InvariantError(std::string("invariant broken: ") + (message) + " (" __FILE__ ":" + \
                                     std::to_string(__LINE__) + ")");                                \
    }                                                                                                \
  } while (false)
