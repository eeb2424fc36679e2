#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace kvtier::offload {

/// The processor-sharing link of docs/semantics.md §5.4 (worked example P20):
/// n active transfers each progress at bandwidth/n. kvtier's copies are real,
/// so this is an estimator only — it answers when a transfer is expected to
/// end, for earliest_offload_deadline and a scheduler's virtual clock.
class ProcessorSharingLink {
 public:
  /// `bytes_per_ms` <= 0: infinite (every transfer ends when it starts).
  explicit ProcessorSharingLink(double bytes_per_ms = 0.0) : bandwidth_(bytes_per_ms) {}

  void set_bandwidth(double bytes_per_ms);
  double bandwidth() const noexcept { return bandwidth_; }
  /// Starts `bytes` at max(now, last update); ids are the caller's.
  void start(std::uint64_t id, double now_ms, double bytes);
  /// Advances the clock; returns the transfers the model finished, in order
  /// (those finished while starting later ones come first). Time never goes back.
  std::vector<std::uint64_t> advance_to(double now_ms);
  /// The real copy ended: the model forgets it.
  void remove(std::uint64_t id);
  /// last update + sum_i min(rem_i, rem_x) / bandwidth, assuming no arrivals.
  std::optional<double> deadline(std::uint64_t id) const;
  std::optional<double> earliest_finish() const;
  bool idle() const noexcept { return active_.empty(); }

 private:
  struct Active {
    std::uint64_t id;
    double remaining;
  };
  double bandwidth_;
  double last_update_ = 0.0;
  std::vector<Active> active_;
  std::vector<std::uint64_t> finished_;  // by advances inside start()
};

}  // namespace kvtier::offload
