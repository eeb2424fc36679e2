#pragma once
#include <stdexcept>
#include <string>

namespace kvtier {

/// Base of every error kvtier throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller broke an API contract (what Dynamo's mocker panics on). The object
/// that threw is left exactly as it was before the call.
class ContractError : public Error {
 public:
  using Error::Error;
};

/// kvtier broke one of its own invariants (a bug, never the caller's fault):
/// a logic error, deliberately not a ContractError, so no caller handles it
/// as a refused request.
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// An impossible or unsupported configuration was requested.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Memory could not be allocated (host runtime; CUDA reports CudaError).
class AllocationError : public Error {
 public:
  using Error::Error;
};

/// An asynchronous copy or fill failed; surfaced when its stream or a later
/// event on that stream is synchronized.
class TransferError : public Error {
 public:
  using Error::Error;
};

/// A CUDA runtime call failed. Carries the status code and names the call.
class CudaError : public Error {
 public:
  CudaError(int code, const std::string& code_name, const std::string& call, const char* file, int line)
      : Error(call + " failed with " + code_name + " (" + std::to_string(code) + ") at " + file + ":" +
              std::to_string(line)),
        code_(code),
        call_(call) {}
  int code() const noexcept { return code_; }
  const std::string& call() const noexcept { return call_; }

 private:
  int code_;
  std::string call_;
};

}  // namespace kvtier
