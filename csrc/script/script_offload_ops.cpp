// Script operations on the offload tier (docs/script.md "Offload"): waiting
// for copies, G2 residency, the swap-in lifecycle and fault injection.
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "script_state.hpp"

#include <unordered_set>
#if KVTIER_WITH_URING
#include "kvtier/tiers/disk/disk_store.hpp"
#endif

namespace kvtier::script {
namespace {

Json id_list(const std::vector<std::uint64_t>& ids) {
  Json list = Json::array();
  for (std::uint64_t id : ids) list.push_back(id);
  return list;
}

}  // namespace

std::vector<PositionalLineageHash> ScriptRunner::State::plh_list(const Fields& f, const char* name) const {
  const auto& value = f.raw(name);
  if (!value.is_array()) f.fail(std::string("field '") + name + "' must be a list");
  std::vector<PositionalLineageHash> out;
  const std::string what = std::string("every entry of '") + name + "'";
  for (const auto& item : value) {
    if (manager_->backend() == g1::G1Backend::Native) {  // native keys blocks by sequence hash
      out.push_back(
          g1::native_tier_key(SequenceHash(f.as_u64(item, what + " (a sequence hash on the native backend)"))));
    } else {
      out.push_back(plh(f, item, what));
    }
  }
  return out;
}

Json ScriptRunner::State::op_wait_offload(const Fields&) {
  const std::size_t quarantined = manager_->offload_stats().quarantined;
  const g1::TierProgress progress = manager_->collect_offloads(true);
  Json out;
  out["completed"] = id_list(progress.completed);
  out["failed"] = id_list(progress.failed);
  out["released"] = quarantined - manager_->offload_stats().quarantined;
  return out;
}

Json ScriptRunner::State::op_host_cached(const Fields& f) {
  Json cached = Json::array();
  const auto& hashes = f.raw("hashes");
  if (!hashes.is_array()) f.fail("field 'hashes' must be a list");
  for (const auto& hash : hashes) {
    cached.push_back(manager_->is_host_cached(SequenceHash(f.as_u64(hash, "every hash"))));
  }
  Json out;
  out["cached"] = std::move(cached);
  return out;
}

Json ScriptRunner::State::op_disk_cached(const Fields& f) {
  const offload::OffloadEngine* engine = session_->engine();
  const tiers::LowerTier* disk = session_->lower_tier(StorageTier::Disk);
  if (engine == nullptr || disk == nullptr) f.fail("disk_cached needs the disk tier (init disk_path)");
  const auto& hashes = f.raw("hashes");
  if (!hashes.is_array()) f.fail("field 'hashes' must be a list");
  std::unordered_set<std::uint64_t> held;
  for (const g1::TieredBlock& block : disk->resident_blocks()) held.insert(block.hash.value());
  Json cached = Json::array();
  for (const auto& hash : hashes) cached.push_back(held.contains(f.as_u64(hash, "every hash")));
  Json out;
  out["cached"] = std::move(cached);
  return out;
}

Json ScriptRunner::State::op_pin_prefix(const Fields& f) {
  const std::string id = f.string("id");
  if (prefix_pins_.contains(id)) f.fail("pins '" + id + "' exist already");
  const auto plhs = plh_list(f, "plhs");
  Json out;
  if (auto pins = manager_->try_pin_g1_prefix(plhs)) {
    out["result"] = "pinned";
    out["blocks"] = pins->blocks;
    prefix_pins_.emplace(id, *pins);
  } else {
    out["result"] = "miss";
  }
  return out;
}

Json ScriptRunner::State::op_swap_in(const Fields& f) {
  const std::string id = f.string("id");
  if (swap_ins_.contains(id)) f.fail("swap-in '" + id + "' exists already");
  const auto plhs = plh_list(f, "plhs");
  std::optional<g1::G1PrefixPins> pins;
  std::string pins_label;
  if (f.has("pins")) {
    pins_label = f.string("pins");
    const auto it = prefix_pins_.find(pins_label);
    if (it == prefix_pins_.end()) f.fail("unknown pins '" + pins_label + "'");
    pins = it->second;
  }
  const g1::SwapInStart start = manager_->try_batch_swap_in(plhs, pins);
  if (pins) prefix_pins_.erase(pins_label);  // consumed by every answer (docs/script.md)
  Json out;
  out["result"] = g1::swap_in_status_name(start.status);
  if (start.status == g1::SwapInStatus::Scheduled) {
    out["count"] = start.count;
    if (start.from_lower > start.from_external) out["from_disk"] = start.from_lower - start.from_external;
    if (start.from_external > 0) out["from_shared"] = start.from_external;
    swap_ins_.emplace(id, start.swap_in_id);
  } else if (start.status == g1::SwapInStatus::BlockedOnG1Offload) {
    out["offload"] = start.offload_id;
  }
  return out;
}

Json ScriptRunner::State::op_register_swap_in(const Fields& f) {
  const std::string id = f.string("id");
  const auto it = swap_ins_.find(id);
  if (it == swap_ins_.end()) f.fail("unknown swap-in '" + id + "'");
  const g1::SwapInRegistration registration = manager_->register_completed_swap_in(it->second);
  swap_ins_.erase(it);
  Json out;
  out["registered"] = registration.registered;
  out["failed"] = registration.failed;
  return out;
}

Json ScriptRunner::State::op_cancel_swap_in(const Fields& f) {
  const std::string id = f.string("id");
  const auto it = swap_ins_.find(id);
  Json out;
  out["cancelled"] = it != swap_ins_.end() && manager_->cancel_swap_in(it->second);
  if (it != swap_ins_.end()) swap_ins_.erase(it);
  return out;
}

Json ScriptRunner::State::op_inject_fault(const Fields& f) {
  const char* disk_faults[] = {"disk_write", "disk_read", "disk_short_read"};
  int given = f.has("copy_batch") + f.has("allocation");
  for (const char* name : disk_faults) given += f.has(name);
  if (given != 1) {
    f.fail(
        "inject_fault needs exactly one of 'copy_batch', 'allocation', 'disk_write', 'disk_read', 'disk_short_read'");
  }
  if (f.has("disk_write") || f.has("disk_read") || f.has("disk_short_read")) return inject_disk_fault(f);
  const bool copy = f.has("copy_batch");
  memory::FaultInjector* faults = session_->runtime().faults();
  KVTIER_EXPECTS(faults != nullptr, "faults can be injected on the host runtime only");
  if (copy) {
    if (session_->engine() == nullptr) f.fail("inject_fault copy_batch needs the offload tier (init host_blocks > 0)");
    session_->engine()->inject_copy_fault(f.u64("copy_batch"));
  } else {
    const std::uint64_t nth = f.u64("allocation");
    if (nth == 0) f.fail("inject_fault allocation counts from 1");
    faults->inject_faults({.fail_allocation_number = nth});
  }
  return Json::object();
}

Json ScriptRunner::State::inject_disk_fault(const Fields& f) {
#if KVTIER_WITH_URING
  offload::OffloadEngine* engine = session_->engine();
  auto* disk =
      engine != nullptr ? dynamic_cast<tiers::disk::DiskStore*>(engine->lower_tier(StorageTier::Disk)) : nullptr;
  if (disk == nullptr) f.fail("disk faults need the disk tier (init disk_path)");
  tiers::disk::DiskFaults faults;
  const auto nth = [&](const char* name) {
    const std::uint64_t n = f.u64(name);
    if (n == 0) f.fail(std::string("inject_fault ") + name + " counts from 1");
    return n;
  };
  if (f.has("disk_write")) faults.fail_write = nth("disk_write");  // ENOSPC: a full disk
  if (f.has("disk_read")) faults.fail_read = nth("disk_read");
  if (f.has("disk_short_read")) faults.short_read = nth("disk_short_read");
  disk->inject_faults(faults);
  return Json::object();
#else
  f.fail("disk faults need the disk tier, and this kvtier was built without liburing");
#endif
}

}  // namespace kvtier::script
