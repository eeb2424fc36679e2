#pragma once
#include <cstddef>

namespace kvtier {

/// One copy: `bytes` from `src` to `dst` — a page, or one layer's chunk of a
/// layer-major page. The one descriptor every copy path takes (the runtime's
/// asynchronous copies, the copy_pages kernel and its reference). Both
/// pointers must stay valid until the copy has completed.
struct CopyDescriptor {
  const void* src = nullptr;
  void* dst = nullptr;
  std::size_t bytes = 0;
};

}  // namespace kvtier
