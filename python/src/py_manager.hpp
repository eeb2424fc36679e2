#pragma once
// The object behind `kvtier.Manager`: a ManagerSession plus what only Python
// has — event callbacks, run after each call that produced events — and the
// conversions between Python values and kvtier's block identities.
#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/model_geometry.hpp"
#include "kvtier/core/unique_block.hpp"
#include "manager_session.hpp"

namespace kvtier::python {

class PyManager {
 public:
  PyManager(ManagerOptions options, std::vector<std::shared_ptr<KvEventSink>> extra_sinks)
      : session_(std::make_unique<ManagerSession>(std::move(options), std::move(extra_sinks))) {}

  /// ContractError once the manager was closed.
  ManagerSession& session();
  g1::G1Manager& manager() { return session().manager(); }
  bool closed() const noexcept { return session_ == nullptr; }
  /// Waits for the copies in flight, then frees the manager, its G2 tier and
  /// its callbacks; the pages live on while a view of them does. Idempotent.
  void close();

  void add_callback(nanobind::callable callback);
  /// false when `callback` was not registered.
  bool remove_callback(const nanobind::handle& callback);
  /// Hands the events made since the last delivery to every callback, in
  /// order; the first exception a callback raised is re-raised once all were
  /// called (the call that made the events has already happened).
  void deliver();
  /// Runs `f` (a manager call, with the Python-side bookkeeping that goes with
  /// it, so a raising callback never skips it), then delivers its events.
  template <class F>
  auto call(F&& f) {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      deliver();
    } else {
      auto result = f();
      deliver();
      return result;
    }
  }
  /// call() for a call that hands out something held (pins, a reservation, a
  /// swap-in): when a callback raises, `give_back(result)` releases it first,
  /// so nothing stays held that the caller never received.
  template <class F, class G>
  auto call_or_give_back(F&& f, G&& give_back) {
    auto result = f();
    try {
      deliver();
    } catch (...) {
      give_back(result);
      throw;
    }
    return result;
  }
  /// Drains the queue `take_events()` and `events()` read.
  nanobind::list take_events();

  /// The cyclic garbage collector's view of the callbacks (nanobind type slots).
  static int traverse(PyObject* self, visitproc visit, void* arg);
  static int clear(PyObject* self);

 private:
  std::unique_ptr<ManagerSession> session_;
  std::vector<nanobind::callable> callbacks_;
};

/// An int in [0, 2^64): TypeError for another type, ValueError out of range
/// (`what` names the value in the message).
std::uint64_t unsigned_from_python(nanobind::handle value, const char* what);
/// int -> a full block (its sequence hash); uuid.UUID -> a partial block.
UniqueBlock block_from_python(nanobind::handle value);
nanobind::object block_to_python(const UniqueBlock& block);
std::vector<UniqueBlock> blocks_from_python(nanobind::handle values);
nanobind::list blocks_to_python(std::span<const UniqueBlock> blocks);
/// int -> (hash, no parent, position 0); (hash, parent or None, position) -> that PLH.
PositionalLineageHash plh_from_python(nanobind::handle value);
std::vector<PositionalLineageHash> plhs_from_python(nanobind::handle values);

void bind_manager(nanobind::module_& module);
/// `groups` (dicts as a script's init.groups), a preset `model` or a
/// `model_config` file (its pages in `kv_cache_dtype`, vLLM's names): the
/// manager's KV cache groups (none: one full-attention group).
std::vector<GroupSpec> groups_from_python(const std::optional<nanobind::list>& groups,
                                          const std::optional<std::string>& model_name,
                                          const std::optional<std::string>& model_config,
                                          const std::optional<std::string>& kv_cache_dtype, const KvGeometry& layout);
/// The owner a call means: a Request's (checked to be this manager's), or an
/// int owner of the MoveBlock level; ContractError when the manager has no
/// such owner.
g1::OwnerId owner_of(PyManager& m, nanobind::handle value);
g1::OwnerId existing_owner(PyManager& m, nanobind::handle value);
void bind_page_calls(nanobind::class_<PyManager>& manager);
void bind_move_block_calls(nanobind::class_<PyManager>& manager);
void bind_offload_calls(nanobind::class_<PyManager>& manager);
void bind_attention(nanobind::class_<PyManager>& manager);
void bind_group_kernels(nanobind::class_<PyManager>& manager);

}  // namespace kvtier::python
