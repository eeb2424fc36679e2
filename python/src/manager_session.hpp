#pragma once
// What one Python `kvtier.Manager` owns: a session (runtime, G1 pool of real
// pages, optional G2 offload engine, G1Manager), the requests' owner ids and
// the events waiting for Python. Plain C++ (no nanobind), so
// the binding files stay thin.
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/metrics/kv_metrics.hpp"
#include "kvtier/session/session.hpp"
#if KVTIER_WITH_PROMETHEUS
#include "kvtier/metrics/prometheus_metrics.hpp"
#endif

namespace kvtier::python {

/// Every setting of `kvtier.Manager(...)`: the session's (its defaults are
/// every front door's) and Python's own.
struct ManagerOptions {
  session::SessionConfig session;
  std::uint64_t seed = 0;
  std::size_t max_pending_events = 1 << 20;
};

/// Keeps events until Python takes them; past `limit` the oldest are dropped
/// and counted, so a program that never reads them does not grow without bound.
class PendingEventSink final : public KvEventSink {
 public:
  explicit PendingEventSink(std::size_t limit) : limit_(limit) {}
  void publish(const KvEvent& event) override;
  std::vector<KvEvent> take();
  std::uint64_t received() const;
  std::uint64_t dropped() const;
  /// While on, every event is also kept for take_fresh() (what Python
  /// callbacks have not been handed yet), independently of take().
  void keep_fresh(bool on);
  std::vector<KvEvent> take_fresh();

 private:
  mutable std::mutex mutex_;  // the offload engine's completions may publish from another call's thread
  std::deque<KvEvent> events_;
  bool keep_fresh_ = false;
  std::vector<KvEvent> fresh_;
  std::size_t limit_;
  std::uint64_t received_ = 0;
  std::uint64_t dropped_ = 0;
};

/// A request the Python scheduler drives: its owner id and block sequence.
struct RequestState {
  std::uint64_t manager_id = 0;
  g1::OwnerId owner;
  ActiveSequence sequence;
  std::size_t computed_tokens = 0;  // what finalize() has been told
  bool finished = false;
  bool admitted = false;  // its first allocation succeeded (the metrics count hits then)
};

class ManagerSession {
 public:
  /// ConfigError for an impossible configuration (nothing is kept).
  ManagerSession(ManagerOptions options, std::vector<std::shared_ptr<KvEventSink>> extra_sinks);
  ManagerSession(const ManagerSession&) = delete;
  ManagerSession& operator=(const ManagerSession&) = delete;

  std::uint64_t id() const noexcept { return id_; }
  g1::G1Manager& manager() noexcept { return session_->manager(); }
  const g1::G1Manager& manager() const noexcept { return session_->manager(); }
  memory::Runtime& runtime() noexcept { return session_->runtime(); }
  memory::KvPool& pool() noexcept { return session_->pool(); }
  const memory::KvPool& pool() const noexcept { return session_->pool(); }
  /// What a view of the pages holds on to.
  std::shared_ptr<session::PageMemory> page_memory() const noexcept { return session_->page_memory(); }
  offload::OffloadEngine* engine() noexcept { return session_->engine(); }
  /// The stack under this manager (its tiers, their counters).
  const session::Session& stack() const noexcept { return *session_; }
  session::Session& stack() noexcept { return *session_; }
  PendingEventSink& events() noexcept { return *events_; }
  driver::RequestDriver driver() { return session_->driver(); }

  /// Owner ids from here up belong to requests; MoveBlock-level callers use those below.
  static constexpr std::uint64_t kFirstRequestOwner = std::uint64_t{1} << 63;
  /// ContractError for an owner id a MoveBlock-level caller may not use (a request's).
  static void check_caller_owner(std::uint64_t owner);

  /// A request over `prompt`, with an owner id no MoveBlock-level caller uses
  /// (request owners count up from 2^63).
  RequestState new_request(std::vector<TokenId> prompt, std::size_t max_output_tokens, bool emit_token_ids,
                           std::vector<TokenId> planned_output);
  /// ContractError unless the request was made by this manager.
  void check_request(const RequestState& request) const;
  /// ContractError unless a handle (`what`: "the prefix pins", ...) made by
  /// manager `manager_id` is this manager's.
  void check_handle(std::uint64_t manager_id, const char* what) const;

  /// Pattern identities of the owner's blocks, in table order (session::Session::pattern_identity).
  std::vector<std::uint64_t> pattern_identities(g1::OwnerId owner) const { return session_->pattern_identities(owner); }

  /// A request's first successful allocation found `cached_blocks` of its
  /// prompt's full blocks in G1: the hits and queries of the metrics. Blocks
  /// swapped in since the last admission count as G2 hits first (the
  /// scheduler swaps in for the request it admits next).
  void count_admission(const RequestState& request, std::size_t cached_blocks);
  /// A swap-in started that reads `from_lower` of its blocks from below G2
  /// on the way, `from_external` of them from the shared store (G4).
  void note_swap_in(std::uint64_t swap_in_id, std::size_t from_lower, std::size_t from_external) {
    if (from_lower > 0) swap_ins_from_lower_[swap_in_id] = {from_lower, from_external};
  }
  /// A swap-in registered `blocks` in G1 (0 when it failed or was cancelled).
  void count_swap_in(std::uint64_t swap_in_id, std::size_t blocks);
  /// The request driver's whole prefix swap-in (swap_in_prefix) registered
  /// `blocks`, `from_lower` of them read from below G2, `from_external` from G4.
  void count_prefix_swap_in(std::size_t blocks, std::size_t from_lower, std::size_t from_external) {
    swapped_in_unclaimed_ += blocks;
    swapped_in_from_lower_unclaimed_ += from_lower;
    swapped_in_from_external_unclaimed_ += from_external;
  }
  /// The tiers now, the request-level counts and the events handed to Python.
  metrics::KvMetrics kv_metrics() const;
#if KVTIER_WITH_PROMETHEUS
  /// The series prometheus_text() renders (made on first use; counters keep their totals).
  metrics::PrometheusMetrics& prometheus();
#endif

 private:
  std::uint64_t id_;
  std::uint64_t seed_;  // of the requests' random output tokens
  std::shared_ptr<PendingEventSink> events_;
  std::unique_ptr<session::Session> session_;
  metrics::KvMetrics request_counts_;  // query_blocks and each tier's hit_blocks (count_admission)
  std::uint64_t swapped_in_unclaimed_ = 0;
  std::uint64_t swapped_in_from_lower_unclaimed_ = 0;     // of them, blocks that came from G3
  std::uint64_t swapped_in_from_external_unclaimed_ = 0;  // of those, blocks that came from G4
  // By swap-in id, until registered: blocks from below G2, and of them from G4.
  std::unordered_map<std::uint64_t, std::pair<std::size_t, std::size_t>> swap_ins_from_lower_;
#if KVTIER_WITH_PROMETHEUS
  std::unique_ptr<metrics::PrometheusMetrics> prometheus_;
#endif
  std::uint64_t next_request_owner_ = kFirstRequestOwner;
  std::uint64_t next_request_seed_ = 0;
};

}  // namespace kvtier::python
