#pragma once
// The harness's line generator: each next line is drawn after looking at the
// runner's state, so most operations are valid (deref of the owner's real
// tail, promote of its real partial, generate of allocated sequences) and the
// rest probe refusals (wrong order, unknown names, wrong types, broken JSON).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "harness/trial_config.hpp"
#include "kvtier/script/script_runner.hpp"

namespace kvtier::harness {

class RandomOperations {
 public:
  explicit RandomOperations(const TrialConfig& config);
  std::string next(const script::ScriptRunner& runner);
  /// Learns from the runner's answer to a line (sequence lengths).
  void observe(const std::string& line, const nlohmann::ordered_json& answer);

 private:
  using Json = nlohmann::ordered_json;
  std::uint64_t pick(std::uint64_t n) { return rng_() % n; }
  bool chance(std::uint32_t percent) { return pick(100) < percent; }
  template <class T>
  const T& one_of(const std::vector<T>& items) {
    return items[pick(items.size())];
  }

  /// Hashes come in chains (chain c holds c*1000+1 .. c*1000+kChainLength);
  /// a hash's lineage hash is fixed by its place in its chain, as real ones are.
  static Json plh(std::uint64_t hash);
  /// Mostly an owner that holds blocks now; sometimes any label.
  std::string owner_label(const script::ScriptRunner& runner);
  /// A name never drawn before: the prefix and a counter.
  std::string fresh_name(char prefix);
  /// Mostly a live sequence (`generable`: one allocated to its length).
  std::string sequence_name(bool generable = false);
  std::string reservation_name(std::vector<std::string>& names, const char* prefix);
  /// An op on one of `names` is drawn mostly when there is one.
  bool worth_trying(const std::vector<std::string>& names);
  /// The owner's blocks as the script names them, in table order.
  std::vector<Json> table_of(const script::ScriptRunner& runner, const std::string& owner) const;

  Json use(const script::ScriptRunner& runner);
  Json deref(const script::ScriptRunner& runner);
  Json promote(const script::ScriptRunner& runner);
  Json finalize(const script::ScriptRunner& runner);
  Json sequence();
  /// An offload op: wait_offload, host_cached, pin_prefix, swap_in,
  /// register_swap_in, cancel_swap_in, inject_fault.
  Json offload(const script::ScriptRunner& runner);
  /// `count` consecutive blocks of a chain, from `first`, as `plhs` entries
  /// (lineage hashes on KVBM, plain hashes on native).
  Json chain_keys(std::uint64_t chain, std::uint64_t first, std::uint64_t count) const;
  std::string malformed();
  /// A line for a manager with KV cache groups: requests' operations (it
  /// refuses signals; a few are drawn to check that), tables per group.
  std::string next_grouped(const script::ScriptRunner& runner);

  TrialConfig config_;
  std::mt19937_64 rng_;
  std::vector<std::string> owners_{"a", "b", "c", "d"};
  std::vector<std::string> sequences_;
  std::vector<std::string> sequence_owners_;  // aligned with sequences_
  struct SequenceState {
    std::uint64_t length = 0;
    std::uint64_t allocated = 0;
  };
  std::map<std::string, SequenceState> live_;  // what the runner said of each sequence
  std::vector<std::string> decode_reservations_;
  std::vector<std::string> destinations_;
  std::map<std::string, std::string> destination_sequences_;
  std::vector<std::string> pins_;      // live pin_prefix labels
  std::vector<std::string> swap_ins_;  // scheduled swap-in labels
  std::uint64_t next_name_ = 0;
};

}  // namespace kvtier::harness
