#pragma once
// Replays a request trace on real memory (issue #9, first part): a scheduler
// loop in virtual time close to vLLM's — arrivals by timestamp, chunked
// prefill under a token budget per step, one decode token per running request
// per step, LIFO preemption when G1 runs out — driving a G1Manager through the
// shared RequestDriver, with the offload tier's swap-ins before admission.
// Every computed token's K/V goes into its slot through write_kv (the kernel
// on CUDA, its reference on HostRuntime); every reused block (G1 prefix hit
// or swap-in) is checked against the K/V its tokens must hold.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/memory/runtime.hpp"
#include "kvtier/metrics/kv_metrics.hpp"
#include "kvtier/replay/group_page_check.hpp"
#include "kvtier/replay/trace.hpp"
#include "kvtier/session/session_config.hpp"

namespace kvtier::replay {

enum class VerifyMode : std::uint8_t { Off, Sample, Full };
/// "off", "sample" or "full"; ConfigError otherwise.
VerifyMode parse_verify_mode(const std::string& name);

/// How `--instances N` spreads requests: in turn, or by the hash of the
/// first prompt block (a prefix-aware router's affinity).
enum class RouteMode : std::uint8_t { RoundRobin, Hash };
/// "round_robin" or "hash"; ConfigError otherwise.
RouteMode parse_route_mode(const std::string& name);

/// One lookup or computation of a request's prompt blocks, in the order the
/// replay made them: what the bound beside a replay is computed on
/// (docs/replay.md "The bound").
struct PrefixStep {
  std::size_t request = 0;  // index in the requests replayed (with instances, in the whole list)
  std::size_t blocks = 0;   // the request's first `blocks` full prompt blocks (hash units)
  bool counted = false;     // a first admission: its hits are the report's
};

struct ReplayConfig {
  /// G1 (its block size must divide 512), the page layout, the G2 tier, more
  /// listeners of the KV events (a ZMQ publisher); the session's defaults.
  session::SessionConfig session;
  std::uint32_t max_running = 32;
  /// Requests longer than this (prompt and output) are refused, as vLLM
  /// refuses a prompt past its max_model_len, and counted (not replayed).
  std::optional<std::size_t> max_model_len{};
  std::size_t token_budget = 8192;           // prompt and decode tokens per step
  std::optional<std::size_t> output_tokens;  // overrides every request's output length
  VerifyMode verify = VerifyMode::Sample;
  std::uint32_t sample_every = 8;  // Sample: the first reused block of a request and every 8th after it
  /// Every Nth scheduler step, one decode step of paged attention over up to
  /// `attention_check_sequences` running requests, through the session's
  /// device block tables, is checked against dense attention over their
  /// tokens' K/V (AttentionCheck). 0: never.
  std::uint32_t attention_check_every = 64;
  std::uint32_t attention_check_sequences = 2;
  double step_ms = 10.0;   // virtual duration of one scheduler step
  std::uint64_t seed = 0;  // output tokens, injected faults
  /// HostRuntime only: before each swap-in or allocation, one chance in this
  /// many that the offload engine's next copy batch fails (0: never).
  std::uint32_t copy_fault_one_in = 0;
  /// Called after every scheduler step with (requests finished, requests in
  /// the trace): the CLI's progress bar.
  std::function<void(std::size_t, std::size_t)> progress{};
  /// What ends each scheduler step for the event listeners (a ZMQ
  /// publisher's flush: one batch per step).
  std::function<void()> step_end{};
  /// Refuse a request that needs more G1 pages than there are, count it and
  /// go on (vLLM refuses it and serves the rest); false: the replay stops
  /// with a ConfigError before it starts.
  bool refuse_oversized = true;
  /// Keep every admission and prefill chunk as a PrefixStep (the bound).
  bool record_prefix_steps = false;
  /// Stored events carry the blocks' token ids (what vLLM's BlockStored sends).
  bool emit_token_ids = false;
  /// Called after every scheduler step with the metrics so far and the
  /// step's wall time, and once more after the last collect (no step time):
  /// the Prometheus exporter. Its figures agree with the report's.
  std::function<void(const metrics::KvMetrics&, std::optional<double> step_seconds)> observe_metrics{};
  /// kvtier instances in this process (replay_instances): each its own
  /// session (G1, G2, threads), requests routed among them, all on one
  /// shared tier when the session has one.
  std::uint32_t instances = 1;
  RouteMode route = RouteMode::RoundRobin;
  /// What one instance of several has of its own (index = instance): more
  /// listeners of its KV events, what ends each of its steps for them (a
  /// ZMQ publisher per data-parallel rank) and its metrics' observer (as
  /// observe_metrics). Empty, or one per instance; instance i's events carry
  /// the session's dp rank plus i.
  struct InstanceOutputs {
    std::vector<std::shared_ptr<KvEventSink>> event_sinks;
    std::function<void()> step_end;
    std::function<void(const metrics::KvMetrics&, std::optional<double> step_seconds)> observe_metrics{};
  };
  std::vector<InstanceOutputs> instance_outputs{};
};

struct ReplayReport {
  std::size_t requests = 0;
  /// Requests refused: longer than max_model_len, more pages than all of G1
  /// (refuse_oversized), or (a manager with KV cache groups) more pages than
  /// all of G1 when alone. Counted in `requests`.
  std::size_t rejected_requests = 0;
  std::size_t running_request_steps = 0;  // requests running at the end of each step, summed
  std::size_t peak_running = 0;           // the most requests running at once
  std::size_t prompt_tokens = 0;
  std::size_t generated_tokens = 0;
  std::size_t steps = 0;
  std::size_t prompt_blocks = 0;  // full prompt blocks asked for (first admission of each request)
  std::size_t g1_hit_blocks = 0;
  std::size_t g2_hit_blocks = 0;  // swapped in from G2 (G3's excluded)
  std::size_t g3_hit_blocks = 0;  // swapped in from G3, through G2
  std::size_t preemptions = 0;
  std::size_t evictions = 0;  // blocks whose last G1 copy was evicted (Device Removed)
  std::size_t swap_outs = 0;  // blocks that landed in G2
  std::size_t swap_ins = 0;   // blocks registered back into G1
  std::size_t swap_out_bytes = 0;
  std::size_t swap_in_bytes = 0;
  double swap_out_gbps = 0.0;  // bytes / time with a swap-out in flight (a floor: ends are seen at polls)
  double swap_in_gbps = 0.0;
  std::size_t kv_tokens_written = 0;  // tokens whose K/V write_kv put into their slots
  std::size_t kv_bytes_written = 0;
  std::size_t failed_copies = 0;  // transfers whose copy failed (their blocks were dropped, not corrupted)
  // Blocks each tier's admission declined (docs/policies.md; 0 when it admits all).
  std::size_t g2_admission_declined = 0;  // G1 evictions G2 did not store
  std::size_t g3_admission_declined = 0;  // G2 evictions G3 did not store
  std::size_t g4_admission_declined = 0;  // G2 evictions (or landings) G4 did not publish
  // The G3 disk tier (all 0 without one).
  std::size_t g3_recovered_blocks = 0;  // blocks the tier held when the replay started (a restart)
  std::size_t g3_blocks_written = 0;
  std::size_t g3_blocks_read = 0;  // read and verified
  std::size_t g3_bytes_written = 0;
  std::size_t g3_bytes_read = 0;
  double g3_write_gbps = 0.0;  // bytes / time with a write in flight (a floor, as the copies')
  double g3_read_gbps = 0.0;
  std::size_t g3_checksum_failures = 0;        // reads that did not verify: dropped, the request recomputed
  std::size_t g3_io_failures = 0;              // failed or short reads and writes
  std::size_t g3_demotions_refused = 0;        // G2 evictions G3 had no room for at that moment
  std::size_t g3_authentication_failures = 0;  // of the checksum failures: refused by the tier key (forged, no MAC)
  // What opening G3 found and did (issue 31, L2).
  std::size_t g3_slots_torn = 0;             // torn or damaged headers: free again
  std::size_t g3_slots_superseded = 0;       // older copies of a block a newer one replaced
  std::size_t g3_slots_unauthenticated = 0;  // records without the tier key's MAC id: never served
  std::size_t g3_dropped_on_shrink = 0;      // the oldest blocks a smaller --disk-blocks had no room for
  std::size_t g3_discarded_by_reformat = 0;  // blocks --disk-reformat threw away
  std::size_t g3_parked_slots = 0;           // slots left alone since the file system filled (ENOSPC)
  // The G4 shared tier (all 0 without one).
  std::size_t g4_hit_blocks = 0;         // swapped in from G4, through G2
  std::size_t g4_blocks_published = 0;   // values this instance's SET stored
  std::size_t g4_already_present = 0;    // publishes another instance had made first (SET NX refused)
  std::size_t g4_publishes_refused = 0;  // G2 evictions not published: the in-flight bound was full
  std::size_t g4_blocks_fetched = 0;     // read and verified
  std::size_t g4_bytes_fetched = 0;
  double g4_fetch_gbps = 0.0;                  // bytes / time with a fetch in flight (a floor)
  std::size_t g4_lookups = 0;                  // pipelined header lookups (one per swap-in that reached G4)
  std::size_t g4_values_missing = 0;           // found by a lookup, gone when read (evicted, a shard restarted)
  std::size_t g4_checksum_failures = 0;        // values that did not check (garbage, another layout): misses
  std::size_t g4_errors = 0;                   // commands without an answer or with an error reply
  std::size_t g4_authentication_failures = 0;  // of the checksum failures: refused by the tier key
  std::size_t g4_other_version = 0;            // values of another record version: kept, not served
  std::size_t g4_oversized = 0;                // values longer than a block's: refused unread, deleted
  std::size_t g4_answered = 0;                 // commands the store answered: 0 means it never served
  std::size_t g4_read_only = 0;                // instances whose writes the store refused (NOPERM)
  std::size_t allocator_ops = 0;               // manager calls made by the replay
  std::size_t pages_verified = 0;
  std::size_t mismatches = 0;
  std::size_t attention_checks = 0;      // decode steps of paged attention checked
  std::size_t attention_sequences = 0;   // sequences attended to and compared
  std::size_t attention_mismatches = 0;  // sequences whose attention differed from their tokens' K/V
  std::optional<std::uint32_t> first_bad_page;
  /// A manager with KV cache groups: each group's hits, cached and evicted
  /// blocks and byte checks (mismatches above include theirs).
  std::vector<GroupReplayCounts> groups{};
  /// ReplayConfig::record_prefix_steps: the admissions and chunks, in order
  /// (one instance's; combine() keeps none).
  std::vector<PrefixStep> prefix_steps{};
  double virtual_ms = 0.0;
  double wall_seconds = 0.0;
  double g1_hit_rate() const { return prompt_blocks == 0 ? 0.0 : double(g1_hit_blocks) / double(prompt_blocks); }
  double g2_hit_rate() const { return prompt_blocks == 0 ? 0.0 : double(g2_hit_blocks) / double(prompt_blocks); }
  double g3_hit_rate() const { return prompt_blocks == 0 ? 0.0 : double(g3_hit_blocks) / double(prompt_blocks); }
  double g4_hit_rate() const { return prompt_blocks == 0 ? 0.0 : double(g4_hit_blocks) / double(prompt_blocks); }
  /// Requests running at once, averaged over the scheduler steps.
  double mean_running() const { return steps == 0 ? 0.0 : double(running_request_steps) / double(steps); }
  /// Prompt blocks found in any tier, over prompt blocks.
  double hit_rate() const {
    return prompt_blocks == 0
               ? 0.0
               : double(g1_hit_blocks + g2_hit_blocks + g3_hit_blocks + g4_hit_blocks) / double(prompt_blocks);
  }
};

/// Throws ConfigError for an impossible configuration (a block size that does
/// not divide 512, a zero budget or running limit, a request longer than G1).
/// A manager with KV cache groups (session.manager.groups) is driven by
/// requests through its groups' tables: sequences hashed at its hash unit
/// (any size: the trace's tokens do not depend on it), every computed block's
/// pages written and every hit's pages checked per group (GroupPageCheck: K/V
/// in an attention group's page format, the page pattern for a Mamba state),
/// Mamba states stepped, and the attention check run on every attention group
/// that holds K/V (GroupAttentionCheck).
ReplayReport replay(memory::Runtime& runtime, const ReplayConfig& config, const std::vector<TraceRequest>& requests);

/// The replay of config.instances kvtier instances in one process, each its
/// own session on `runtime`, requests routed among them by config.route and
/// interleaved in virtual time (the instance furthest behind steps next).
/// One report per instance; combine() sums them.
std::vector<ReplayReport> replay_instances(memory::Runtime& runtime, const ReplayConfig& config,
                                           const std::vector<TraceRequest>& requests);
/// The reports' counts summed; rates follow from the sums, bandwidths are
/// byte-weighted.
ReplayReport combine(const std::vector<ReplayReport>& reports);

}  // namespace kvtier::replay
