#pragma once
// Private to the script runner: the state one script drives, and its operations.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/script/script_runner.hpp"
#include "kvtier/session/session.hpp"
#include "script_fields.hpp"

namespace kvtier::script {

using Json = nlohmann::ordered_json;

class ScriptRunner::State {
 public:
  /// Runs one operation; throws ScriptError / kvtier::Error when refused.
  Json dispatch(const Fields& fields, const std::string& op);
  bool initialized() const noexcept { return session_ != nullptr; }
  const g1::G1Manager* manager() const noexcept { return manager_; }
  std::string partial_label(const Uuid& uuid) const;
  std::optional<g1::OwnerId> owner_id(const std::string& label) const {
    const auto it = owners_.find(label);
    return it == owners_.end() ? std::nullopt : std::optional<g1::OwnerId>(it->second);
  }
  std::vector<PageId> mismatched_pages(std::span<const PageId> pages, std::span<const UniqueBlock> blocks) const;
  std::optional<g1::GroupPatterns> owner_patterns(const std::string& label) const;
  std::vector<PageId> mismatched_patterns(std::span<const PageId> pages,
                                          std::span<const std::uint64_t> identities) const;
  /// A refusal's message in the script's own names: partial labels for
  /// UUIDs, owner labels for owner numbers.
  std::string describe(std::string message) const;
  /// Events published since the operation started, as JSON.
  Json take_events();
  void set_event_sinks(std::vector<std::shared_ptr<KvEventSink>> sinks) { event_sinks_ = std::move(sinks); }

 private:
  struct ScriptSequence {
    ActiveSequence sequence;
    g1::OwnerId owner;
    std::size_t partials_labelled = 0;  // numbers the labels of its partial blocks
    std::vector<Uuid> labelled;         // its partial blocks that have a label now
  };
  struct ScriptDestination {
    g1::DestinationReservation reservation;
    std::string sequence;
  };

  Json op_init(const Fields& f);
  Json op_use(const Fields& f, bool decode);
  Json op_deref(const Fields& f);
  Json op_promote(const Fields& f);
  Json op_finalize(const Fields& f);
  Json op_reserve_decode(const Fields& f);
  Json op_release_decode(const Fields& f);
  Json op_sequence(const Fields& f);
  Json op_allocate(const Fields& f);
  Json op_generate(const Fields& f);
  Json op_free(const Fields& f);
  Json op_drop(const Fields& f);
  Json op_prefill_cost(const Fields& f);
  Json op_reserve_destination(const Fields& f);
  Json op_activate_destination(const Fields& f);
  Json op_cancel_destination(const Fields& f);
  Json op_stats(const Fields& f);
  Json op_cached(const Fields& f);
  Json op_block_table(const Fields& f);
  Json op_write(const Fields& f);
  /// write and verify on a manager with KV cache groups: every page of every
  /// group the owner holds, named through the owner's sequence.
  Json write_groups(const Fields& f, g1::OwnerId owner);
  Json verify_groups(const Fields& f, g1::OwnerId owner);
  const ActiveSequence& sequence_of(const Fields& f, g1::OwnerId owner) const;
  const ActiveSequence* find_sequence_of(g1::OwnerId owner) const;
  Json op_verify(const Fields& f);
  Json op_wait_offload(const Fields& f);
  Json op_host_cached(const Fields& f);
  Json op_disk_cached(const Fields& f);
  Json op_pin_prefix(const Fields& f);
  Json op_swap_in(const Fields& f);
  Json op_register_swap_in(const Fields& f);
  Json op_cancel_swap_in(const Fields& f);
  Json op_inject_fault(const Fields& f);
  Json inject_disk_fault(const Fields& f);

  g1::OwnerId owner(const Fields& f, const char* name = "owner");
  UniqueBlock block(const Fields& f, const nlohmann::json& value, const std::string& what);
  std::vector<UniqueBlock> blocks(const Fields& f, const char* name);
  PositionalLineageHash plh(const Fields& f, const nlohmann::json& value, const std::string& what) const;
  std::vector<PositionalLineageHash> plh_list(const Fields& f, const char* name) const;
  UseSignal use_signal(const Fields& f);
  ScriptSequence& sequence(const Fields& f, const char* name = "sequence");
  /// Labels every partial block of the sequence the script has not seen yet,
  /// and forgets the labels of its blocks that are partial no more.
  void label_partials(ScriptSequence& entry, const std::string& id);
  std::unordered_map<std::string, Uuid>::iterator add_label(const std::string& label, const Uuid& uuid);
  void forget_label(const Uuid& uuid);
  Json block_json(const UniqueBlock& block) const;
  /// The script format's pattern identity (docs/spec/script-format.md): the
  /// session's for a full block (its sequence hash), XXH3-64 of the label
  /// for a partial one, so a script's pages are the same bytes on every run.
  std::uint64_t pattern_identity(const UniqueBlock& block) const;
  /// Pattern identities of the blocks the owner's pages back now, in table order.
  std::vector<std::uint64_t> pattern_identities(g1::OwnerId owner) const;
  void require_init(const Fields& f) const;
  driver::RequestDriver driver() { return session_->driver(); }
  static Json acquire_json(const g1::G1Acquire& acquire);

  std::shared_ptr<RecordingEventSink> sink_ = std::make_shared<RecordingEventSink>();
  std::vector<std::shared_ptr<KvEventSink>> event_sinks_;  // more listeners, given by the caller
  std::unique_ptr<session::Session> session_;              // made by init
  g1::G1Manager* manager_ = nullptr;                       // the session's
  std::uint64_t seed_ = 0;  // seeds each sequence with its id, so scripts replay byte for byte
  std::map<std::string, g1::OwnerId> owners_;
  std::unordered_map<std::uint64_t, std::string> owner_labels_;
  std::unordered_map<std::string, std::string> partial_by_text_;  // UUID text -> label, for messages
  std::unordered_map<std::string, Uuid> partial_by_label_;
  std::unordered_map<Uuid, std::string> label_by_partial_;
  std::map<std::string, ScriptSequence> sequences_;
  std::map<std::string, g1::DecodeReservation> decode_reservations_;
  std::map<std::string, ScriptDestination> destinations_;
  std::map<std::string, g1::G1PrefixPins> prefix_pins_;
  std::map<std::string, std::uint64_t> swap_ins_;  // label -> swap-in id
};

}  // namespace kvtier::script
