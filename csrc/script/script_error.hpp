#pragma once
#include <cstddef>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::script {

/// A malformed script line; its message starts with "line N: ".
class ScriptError : public Error {
 public:
  ScriptError(std::size_t line, const std::string& message) : Error("line " + std::to_string(line) + ": " + message) {}
};

}  // namespace kvtier::script
