#pragma once
// One replay of requests on one session (private to replay/): the scheduler
// in virtual time — arrivals, chunked prefill, decode, LIFO preemption,
// admission with the tiers' swap-ins — in replay_run.cpp, and what checks
// the pages it fills (K/V writes, reused pages, attention) in
// replay_checks.cpp. replayer.cpp runs one or several of them.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/replay/attention_check.hpp"
#include "kvtier/replay/group_attention_check.hpp"
#include "kvtier/replay/group_page_check.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/replay/token_kv_writer.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::replay {

struct Request {
  std::size_t index = 0;
  g1::OwnerId owner;
  ActiveSequence sequence;
  std::size_t prompt_length = 0;
  std::size_t computed = 0;  // tokens whose KV is in G1 (reused or computed)
  bool admitted_before = false;
  bool prefilled = false;
};

class Replay {
 public:
  /// `trace_index`: each request's index in the whole trace (its output
  /// tokens' seed); empty: its index here.
  Replay(memory::Runtime& runtime, const ReplayConfig& config, const std::vector<TraceRequest>& requests,
         std::vector<std::size_t> trace_index = {});

  ReplayReport run();

  bool finished() const { return next_arrival_ >= requests_.size() && waiting_.empty() && running_.empty(); }
  /// Virtual time: where this replay's next step starts.
  double now() const { return now_; }
  std::size_t requests_done() const { return report_.requests - waiting_.size() - running_.size(); }

  /// One scheduler step, or an idle jump to the next arrival.
  void advance();

  /// Collects the last copies and fills the report.
  ReplayReport finish();

 private:
  /// The tiers now and the report's counters so far.
  metrics::KvMetrics kv_metrics() const;

  void arrive();

  void step();

  enum class Outcome : std::uint8_t { Running, Finished, Preempted };

  /// Preempts the most recently admitted running request other than `keep`
  /// (LIFO); false when there is none.
  bool preempt_other(std::size_t keep);

  void preempt(std::size_t i);

  driver::RequestDriver driver() { return driver::RequestDriver(*manager_); }

  /// `r`'s prompt blocks up to `tokens`, looked up (`counted`) or computed.
  void record_step(const Request& r, std::size_t tokens, bool counted);

  /// A request not admitted now goes back to the front of the queue.
  Outcome wait(std::size_t i);

  /// Refuses a running request that does not fit in G1 alone.
  void reject(std::size_t i);

  void maybe_inject_fault();

  /// Allocates `r` up to `tokens`, making room: the driver waits for
  /// swap-outs that block, and the replay preempts others (LIFO). false: `r`
  /// was preempted and left `running_`.
  bool allocate(std::size_t& index, std::size_t tokens);

  Outcome prefill(std::size_t index, std::size_t& budget);

  /// Tokens [from, to) were computed: their full blocks get their patterns.
  /// `record`: a chunk after the admission's, a step of the bound.
  void finish_chunk(Request& r, std::size_t from, std::size_t to, std::size_t& budget, bool record = true);

  Outcome decode(Request& r);

  /// Frees the request's pages (Deref); its staged K/V is written first, so
  /// no write lands on a page after it changed hands.
  void release(Request& r);

  /// The K/V identities of the tokens [block * bs, block * bs + count) of `r`.
  void token_identities(const Request& r, std::size_t block, std::size_t count, std::vector<std::uint64_t>& out) const;

  /// Tokens [from, to) were computed: their K/V goes into their slots.
  void write_tokens(const Request& r, std::size_t from, std::size_t to);

  /// One decode step of paged attention over some running requests' pages,
  /// taken in turn across checks, compared with their tokens' K/V.
  void check_attention();

  /// The next decode token's attention in every attention group, over some
  /// running requests (taken in turn), through the groups' real tables.
  void check_group_attention();

  /// The first `hits` blocks were reused: their pages must hold their tokens' K/V.
  void verify_reused(const Request& r, std::size_t hits);

  ReplayConfig config_;
  const std::vector<TraceRequest>& requests_;
  std::vector<std::size_t> trace_index_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::unique_ptr<session::Session> session_;
  g1::G1Manager* manager_;                     // the session's
  offload::OffloadEngine* engine_;             // the session's G2 tier, or nullptr
  std::unique_ptr<TokenKvWriter> writer_;      // writes the session's pages: declared after it
  std::unique_ptr<AttentionCheck> attention_;  // reads them; null when off
  /// A manager with groups: each attention group's check (the groups with K/V fills).
  std::vector<std::pair<std::size_t, std::unique_ptr<GroupAttentionCheck>>> group_attention_;
  std::shared_ptr<GroupEventCounter> group_events_;  // a manager with groups: its events per group
  std::unique_ptr<GroupPageCheck> group_check_;      // a manager with groups: its pages' patterns
  bool grouped_ = false;                             // the manager has KV cache groups
  std::size_t hash_unit_ = 0;                        // the sequences' block size
  std::size_t mamba_align_unit_ = 0;                 // a Mamba group in align mode: its chunks end on this
  std::vector<std::uint64_t> identity_buffer_;
  std::deque<Request> waiting_;
  std::vector<Request> running_;
  std::size_t next_arrival_ = 0;
  double now_ = 0.0;
  std::mt19937_64 fault_rng_{config_.seed ^ 0xFA17ULL};
  ReplayReport report_;
};

}  // namespace kvtier::replay
