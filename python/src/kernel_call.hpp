#pragma once
// What a Python call of one of kvtier's kernels takes: C-contiguous tensors
// (numpy on the host runtime, torch on either, through DLPack), and the stream
// it runs on — the caller's native stream on CUDA (a cudaStream_t as int; 0 is
// the legacy default stream), the session's compute stream on the host
// runtime, where the call waits so that numpy and torch see the result on return.
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>

#include "kvtier/memory/runtime.hpp"
#include "py_manager.hpp"

namespace kvtier::python {

using Floats = nanobind::ndarray<float, nanobind::c_contig>;
using Ints = nanobind::ndarray<std::int32_t, nanobind::c_contig>;

inline bool on_cuda(PyManager& m) { return m.session().runtime().kind() == memory::RuntimeKind::Cuda; }

template <class F>
void run_on_stream(PyManager& m, std::uintptr_t stream, F&& work) {
  session::Session& session = m.session().stack();
  const bool cuda = on_cuda(m);
  std::optional<memory::Stream> borrowed;
  memory::Stream& on = cuda ? borrowed.emplace(session.runtime().borrow_stream(reinterpret_cast<void*>(stream)))
                            : session.compute_stream();
  work(on);
  if (!cuda) on.synchronize();
}

}  // namespace kvtier::python
