#pragma once
// The two checks every layer uses: a caller's contract (ContractError with the
// message) and kvtier's own invariants (InvariantError naming file and line).
// The message is given in parts — strings, numbers, anything a stream
// prints — joined in order, and built only when the check fails:
//   KVTIER_EXPECTS(blocks <= capacity, "a table of ", blocks, " blocks exceeds ", capacity);
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::detail {

/// The parts of a check's message, joined (a lone string is taken as is).
template <class... Parts>
std::string check_message(Parts&&... parts) {
  if constexpr (sizeof...(Parts) == 1 && (std::is_convertible_v<Parts, std::string> && ...)) {
    return std::string(std::forward<Parts>(parts)...);
  } else {
    std::ostringstream out;
    (out << ... << std::forward<Parts>(parts));
    return out.str();
  }
}

}  // namespace kvtier::detail

/// Refuses the call with ContractError(message) unless `condition` holds.
#define KVTIER_EXPECTS(condition, ...)                                                             \
  do {                                                                                             \
    if (!(condition)) throw ::kvtier::ContractError(::kvtier::detail::check_message(__VA_ARGS__)); \
  } while (false)

/// Throws InvariantError unless `condition` holds: kvtier's own bug.
#define KVTIER_ASSERT(condition, ...)                                                                      \
  do {                                                                                                     \
    if (!(condition)) {                                                                                    \
      throw ::kvtier::InvariantError("invariant broken: " + ::kvtier::detail::check_message(__VA_ARGS__) + \
                                     " (" __FILE__ ":" + std::to_string(__LINE__) + ")");                  \
    }                                                                                                      \
  } while (false)
