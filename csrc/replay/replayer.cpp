#include "kvtier/replay/replayer.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <random>

#include "kvtier/core/checked_arithmetic.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/replay/attention_check.hpp"
#include "kvtier/replay/group_attention_check.hpp"
#include "kvtier/replay/prefill_chunk.hpp"
#include "kvtier/replay/tier_report.hpp"
#include "kvtier/replay/token_kv_writer.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/session/session.hpp"
#include "kvtier/session/shared_tier_factory.hpp"

namespace kvtier::replay {
namespace {

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
         std::vector<std::size_t> trace_index = {})
      : config_(config), requests_(requests), trace_index_(std::move(trace_index)) {
    const std::uint32_t bs = config.session.manager.block_size;
    if (config.max_running == 0) throw ConfigError("max-running must be at least 1");
    if (config.token_budget == 0 || config.token_budget > kMaxSequenceTokens) {
      throw ConfigError("token-budget must be in [1, " + std::to_string(kMaxSequenceTokens) + "]");
    }
    if (config.verify == VerifyMode::Sample && config.sample_every == 0) throw ConfigError("sample_every must be >= 1");
    if (config.max_model_len && *config.max_model_len == 0) throw ConfigError("max_model_len must be at least 1");
    // A manager with groups counts each group's events (the replay's per-group report).
    if (!config.session.manager.groups.empty()) {
      group_events_ = std::make_shared<GroupEventCounter>(config.session.manager.groups.size());
      config_.session.event_sinks.push_back(group_events_);
    }
    const bool grouped = !config.session.manager.groups.empty() &&
                         (config.session.manager.groups.size() > 1 ||
                          config.session.manager.groups.front().kind != GroupKind::FullAttention);
    if (!grouped && (bs < 2 || kTraceBlockTokens % bs != 0)) {
      throw ConfigError("block size " + std::to_string(bs) + " must divide the trace's 512-token blocks");
    }
    for (const TraceRequest& r : requests) {
      // Lengths come from the trace or the command line: a sum that wraps would
      // admit a request that never fits, preempted and recomputed forever.
      const std::size_t output = config.output_tokens.value_or(r.output_length);
      const auto tokens = checked_add(r.input_length, output);
      if (!tokens || *tokens > kMaxSequenceTokens) {
        throw ConfigError("a request of " + std::to_string(r.input_length) + " prompt and " + std::to_string(output) +
                          " output tokens is longer than the " + std::to_string(kMaxSequenceTokens) +
                          " tokens a request may have");
      }
      if (config.max_model_len && *tokens > *config.max_model_len) continue;  // refused when it arrives
      const std::size_t blocks = (*tokens + bs - 1) / bs + 1;
      // With groups a request's pages depend on its groups' windows: one that
      // never fits is refused when it is alone and still does not.
      if (!grouped && blocks > config.session.manager.capacity) {
        throw ConfigError("a request of " + std::to_string(*tokens) + " tokens needs " + std::to_string(blocks) +
                          " G1 pages; capacity is " + std::to_string(config.session.manager.capacity));
      }
    }
    session_ = std::make_unique<session::Session>(runtime, config_.session);
    manager_ = &session_->manager();
    grouped_ = manager_->has_groups();
    hash_unit_ = grouped_ ? manager_->geometry()->hash_block_size() : bs;
    if (grouped_) {
      for (const ResolvedGroup& group : manager_->geometry()->groups()) {
        if (group.spec.kind == GroupKind::Mamba && group.spec.mamba_mode == MambaMode::Align) {
          mamba_align_unit_ = manager_->geometry()->scheduler_block_size();
        }
      }
    }
    engine_ = session_->engine();
    if (engine_ != nullptr) {
      if (const tiers::LowerTier* disk = engine_->lower_tier(StorageTier::Disk)) {
        report_.g3_recovered_blocks = disk->used();  // what an earlier process left
      }
    }
    writer_ = std::make_unique<TokenKvWriter>(session_->pool(), config.token_budget);
    if (grouped_) {
      group_check_ = std::make_unique<GroupPageCheck>(*manager_, session_->pool(), group_events_);
      if (config.attention_check_every > 0 && config.attention_check_sequences > 0) {
        for (std::size_t g = 0; g < manager_->group_count(); ++g) {
          if (const GroupKvFill* fill = group_check_->kv_fill(g)) {
            group_attention_.push_back({g, std::make_unique<GroupAttentionCheck>(*session_, g, *fill)});
          }
        }
      }
    } else if (config.attention_check_every > 0 && config.attention_check_sequences > 0) {
      attention_ = std::make_unique<AttentionCheck>(*session_, config.attention_check_sequences);
    }
    if (config.copy_fault_one_in > 0 && (engine_ == nullptr || runtime.faults() == nullptr)) {
      throw ConfigError("copy faults need the offload tier on the host runtime");
    }
  }

  ReplayReport run() {
    while (!finished()) advance();
    return finish();
  }

  bool finished() const { return next_arrival_ >= requests_.size() && waiting_.empty() && running_.empty(); }
  /// Virtual time: where this replay's next step starts.
  double now() const { return now_; }
  std::size_t requests_done() const { return report_.requests - waiting_.size() - running_.size(); }

  /// One scheduler step, or an idle jump to the next arrival.
  void advance() {
    while (next_arrival_ < requests_.size() && requests_[next_arrival_].timestamp_ms <= now_) arrive();
    if (waiting_.empty() && running_.empty()) {
      now_ = requests_[next_arrival_].timestamp_ms;  // idle: jump to the next arrival
      return;
    }
    const auto step_start = std::chrono::steady_clock::now();
    step();
    writer_->flush();  // the step's forward pass has run
    if (attention_ && report_.steps % config_.attention_check_every == 0) check_attention();
    if (!group_attention_.empty() && report_.steps % config_.attention_check_every == 0) check_group_attention();
    if (config_.step_end) config_.step_end();
    if (config_.observe_metrics) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - step_start;
      config_.observe_metrics(kv_metrics(), took.count());
    }
    now_ += config_.step_ms;
    if (config_.progress) config_.progress(requests_done(), requests_.size());
  }

  /// Collects the last copies and fills the report.
  ReplayReport finish() {
    manager_->collect_offloads(true);
    if (config_.step_end) config_.step_end();  // the last collect's events
    report_.evictions = session_->tier_events().removed(metrics::Tier::G1);
    report_.swap_outs = session_->tier_events().stored(metrics::Tier::G2);
    report_.swap_out_bytes = report_.swap_outs * session_->pool().layout().page_bytes();
    report_.swap_in_bytes = report_.swap_ins * session_->pool().layout().page_bytes();
    if (!group_check_) {  // a manager with groups counts its pattern writes as it goes
      report_.kv_tokens_written = writer_->tokens_written();
      report_.kv_bytes_written = writer_->bytes_written();
    }
    if (engine_ != nullptr) {
      report_.failed_copies = engine_->stats().failed_transfers;
      report_.g2_admission_declined = engine_->stats().admission_declined;
      report_.swap_out_gbps = engine_->swap_out_usage().gbps();
      report_.swap_in_gbps = engine_->swap_in_usage().gbps();
      if (const tiers::LowerTier* disk = engine_->lower_tier(StorageTier::Disk))
        read_disk_tier(*engine_, *disk, report_);
      if (const tiers::LowerTier* shared = engine_->lower_tier(StorageTier::External)) {
        read_shared_tier(*engine_, *shared, report_);
      }
    }
    if (group_check_) report_.groups = group_check_->counts();
    report_.virtual_ms = now_;
    report_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (config_.observe_metrics) config_.observe_metrics(kv_metrics(), std::nullopt);
    return report_;
  }

 private:
  /// The tiers now and the report's counters so far.
  metrics::KvMetrics kv_metrics() const {
    metrics::KvMetrics m = session_->tier_metrics();
    m.query_blocks = report_.prompt_blocks;
    m.tier(metrics::Tier::G1).hit_blocks = report_.g1_hit_blocks;
    m.tier(metrics::Tier::G2).hit_blocks = report_.g2_hit_blocks;
    m.tier(metrics::Tier::G3).hit_blocks = report_.g3_hit_blocks;
    m.tier(metrics::Tier::G4).hit_blocks = report_.g4_hit_blocks;
    m.allocator_operations = report_.allocator_ops;
    m.pages_verified = report_.pages_verified;
    m.verify_mismatches = report_.mismatches;
    return m;
  }

  void arrive() {
    const TraceRequest& trace = requests_[next_arrival_];
    ++report_.requests;
    const std::size_t output = config_.output_tokens.value_or(trace.output_length);
    if (config_.max_model_len && trace.input_length + output > *config_.max_model_len) {
      ++report_.rejected_requests;  // vLLM refuses a request past max_model_len
      ++next_arrival_;
      return;
    }
    ActiveSequence sequence(
        synthesize_prompt(trace),
        ActiveSequenceConfig{
            .block_size = hash_unit_,
            .max_output_tokens = output,
            .enable_prefix_caching = config_.session.manager.enable_prefix_caching,
            .emit_token_ids = config_.emit_token_ids,
            .seed = config_.seed ^ (trace_index_.empty() ? next_arrival_ : trace_index_[next_arrival_])});
    waiting_.push_back(Request{.index = next_arrival_,
                               .owner = g1::OwnerId(next_arrival_ + 1),
                               .sequence = std::move(sequence),
                               .prompt_length = trace.input_length});
    report_.prompt_tokens += trace.input_length;
    ++next_arrival_;
  }

  void step() {
    ++report_.steps;
    manager_->begin_step();             // Mamba states cached in earlier steps may be hit now
    manager_->collect_offloads(false);  // the pass-start tick: apply the copies that have finished
    std::size_t budget = config_.token_budget;
    // Decode: one token for every prefilled request, in admission order.
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
      Request& r = running_[i];
      if (!r.prefilled) {
        ++i;
        continue;
      }
      const Outcome outcome = decode(r);
      --budget;
      if (outcome == Outcome::Finished) {
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (outcome == Outcome::Preempted) {
        continue;  // r left `running_`; the same index now holds the next request
      } else {
        ++i;
      }
    }
    // Prefill chunks of admitted requests, then admission while there is room.
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
      if (running_[i].prefilled) {
        ++i;
        continue;
      }
      if (prefill(i, budget) != Outcome::Running) continue;  // it left `running_`
      ++i;
    }
    while (!waiting_.empty() && running_.size() < config_.max_running && budget > 0) {
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      if (prefill(running_.size() - 1, budget) == Outcome::Preempted) break;  // no room: wait for a finish
    }
    report_.running_request_steps += running_.size();
    report_.peak_running = std::max(report_.peak_running, running_.size());
  }

  enum class Outcome : std::uint8_t { Running, Finished, Preempted };

  /// Preempts the most recently admitted running request other than `keep`
  /// (LIFO); false when there is none.
  bool preempt_other(std::size_t keep) {
    for (std::size_t i = running_.size(); i-- > 0;) {
      if (i == keep) continue;
      preempt(i);
      return true;
    }
    return false;
  }

  void preempt(std::size_t i) {
    Request r = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    release(r);
    r.computed = 0;
    r.prefilled = false;
    ++report_.preemptions;
    waiting_.push_front(std::move(r));
  }

  driver::RequestDriver driver() { return driver::RequestDriver(*manager_); }

  /// A request not admitted now goes back to the front of the queue.
  Outcome wait(std::size_t i) {
    Request deferred = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    waiting_.push_front(std::move(deferred));
    return Outcome::Preempted;
  }

  /// Refuses a running request that does not fit in G1 alone.
  void reject(std::size_t i) {
    Request r = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    release(r);
    ++report_.rejected_requests;
  }

  void maybe_inject_fault() {
    if (config_.copy_fault_one_in > 0 && fault_rng_() % config_.copy_fault_one_in == 0) engine_->inject_copy_fault(1);
  }

  /// Allocates `r` up to `tokens`, making room: the driver waits for
  /// swap-outs that block, and the replay preempts others (LIFO). false: `r`
  /// was preempted and left `running_`.
  bool allocate(std::size_t& index, std::size_t tokens) {
    for (;;) {
      maybe_inject_fault();
      Request& r = running_[index];
      if (driver().allocate_collecting(r.owner, r.sequence, tokens, report_.allocator_ops).is_ready()) return true;
      const g1::OwnerId owner = r.owner;
      if (!preempt_other(index)) {
        if (grouped_) {
          reject(index);  // alone, with every other page evictable: it never fits
        } else {
          preempt(index);
        }
        return false;
      }
      // Preempting a later request never moves `index`; find it again anyway.
      index = static_cast<std::size_t>(
          std::find_if(running_.begin(), running_.end(), [&](const Request& x) { return x.owner == owner; }) -
          running_.begin());
    }
  }

  Outcome prefill(std::size_t index, std::size_t& budget) {
    if (running_[index].computed == 0) {
      // Admission: G2 hits are swapped in first; what does not fit waits at
      // the front of the queue (vLLM admits only what fits).
      maybe_inject_fault();
      Request& r = running_[index];
      std::size_t chunk = budget;
      if (mamba_align_unit_ != 0) {  // its first chunk from its hit, which is on a block boundary
        const std::size_t hit = manager_->get_prefill_cost(r.sequence).cached_tokens;
        chunk = prefill_chunk(hit, r.sequence.len(), r.prompt_length, budget, mamba_align_unit_);
        if (chunk == 0) return wait(index);
      }
      const driver::Admission admission = driver().admit(r.owner, r.sequence, r.prompt_length, chunk);
      report_.allocator_ops += admission.manager_calls;
      report_.swap_ins += admission.swapped_in_pages;
      if (!admission.acquire.is_ready()) {
        if (grouped_ && running_.size() == 1) {
          running_.clear();
          ++report_.rejected_requests;  // alone, with every other page evictable: it never fits
          return Outcome::Finished;
        }
        return wait(index);
      }
      const std::size_t hit_tokens = admission.cached_blocks * manager_->block_size();
      const std::size_t hits = hit_tokens / hash_unit_;
      if (!r.admitted_before) {  // hit rates count a request's first admission
        report_.prompt_blocks += r.prompt_length / hash_unit_;
        const std::size_t swapped = std::min(admission.swapped_in, hits);
        const std::size_t from_lower = std::min(admission.swapped_in_from_lower, swapped);
        const std::size_t from_g4 = std::min(admission.swapped_in_from_external, from_lower);
        report_.g4_hit_blocks += from_g4;
        report_.g3_hit_blocks += from_lower - from_g4;
        report_.g2_hit_blocks += swapped - from_lower;
        report_.g1_hit_blocks += hits - swapped;
        r.admitted_before = true;
      }
      verify_reused(r, hits);
      finish_chunk(r, hit_tokens, admission.allocated_to, budget);
    } else {
      const Request& r = running_[index];
      const std::size_t chunk = prefill_chunk(r.computed, r.sequence.len(), r.prompt_length, budget, mamba_align_unit_);
      if (chunk == 0) return Outcome::Running;  // a block-aligned chunk waits for a step with more budget
      const std::size_t target = r.computed + chunk;
      if (!allocate(index, target)) return Outcome::Preempted;
      finish_chunk(running_[index], running_[index].computed, target, budget);
    }
    Request& r = running_[index];
    // A preempted request recomputes its generated tokens too, then decodes on.
    if (r.computed < r.sequence.len()) return Outcome::Running;
    r.prefilled = true;
    if (r.sequence.is_complete()) {  // prefill only, or a preempted request that had generated everything
      release(r);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
      return Outcome::Finished;
    }
    return Outcome::Running;
  }

  /// Tokens [from, to) were computed: their full blocks get their patterns.
  void finish_chunk(Request& r, std::size_t from, std::size_t to, std::size_t& budget) {
    write_tokens(r, from, to);
    driver().finalize(r.owner, r.sequence, from, to);
    ++report_.allocator_ops;
    budget -= std::min(budget, to - from);
    r.computed = to;
  }

  Outcome decode(Request& r) {
    for (;;) {
      const driver::DecodeStep step = driver().decode(r.owner, r.sequence);
      report_.allocator_ops += step.applied;
      if (step.acquire.is_ready()) {
        ++report_.generated_tokens;
        if (step.finished) return Outcome::Finished;  // the driver released it: its last token is never read
        write_tokens(r, r.sequence.len() - 1, r.sequence.len());
        return Outcome::Running;
      }
      // The token stays; its stopped Use is retried by allocating to the length.
      const auto index = static_cast<std::size_t>(&r - running_.data());
      if (step.acquire.kind == g1::G1Acquire::Kind::BlockedOnOffload) manager_->collect_offloads(true);
      std::size_t at = index;
      if (!allocate(at, running_[at].sequence.len())) return Outcome::Preempted;
      ++report_.generated_tokens;
      Request& now = running_[at];
      if (now.sequence.is_complete()) {  // its final Deref was not applied: release it here
        release(now);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(at));
        return Outcome::Preempted;  // it left `running_` (finished)
      }
      write_tokens(now, now.sequence.len() - 1, now.sequence.len());
      return Outcome::Running;
    }
  }

  /// Frees the request's pages (Deref); its staged K/V is written first, so
  /// no write lands on a page after it changed hands.
  void release(Request& r) {
    writer_->flush();
    driver().release(r.owner, r.sequence);
    ++report_.allocator_ops;
  }

  /// The K/V identities of the tokens [block * bs, block * bs + count) of `r`.
  void token_identities(const Request& r, std::size_t block, std::size_t count, std::vector<std::uint64_t>& out) const {
    const std::size_t bs = config_.session.manager.block_size;
    const auto tokens = r.sequence.tokens();
    const std::uint64_t parent = block == 0 ? 0 : r.sequence.blocks()[block - 1].hash().value();
    std::uint64_t identity = token_kv_identity(parent, {});
    for (std::size_t t = 0; t < count; ++t) {
      identity = page_pattern_word(identity, tokens[block * bs + t]);
      out.push_back(identity);
    }
  }

  /// Tokens [from, to) were computed: their K/V goes into their slots.
  void write_tokens(const Request& r, std::size_t from, std::size_t to) {
    if (from >= to) return;
    if (group_check_) {
      const std::size_t pages = group_check_->write(r.owner, r.sequence, from, to);
      report_.kv_tokens_written += to - from;
      report_.kv_bytes_written += pages * session_->pool().layout().page_bytes();
      return;
    }
    const std::size_t bs = config_.session.manager.block_size;
    const auto table = manager_->block_table(r.owner);
    std::vector<std::uint64_t>& identities = identity_buffer_;
    for (std::size_t block = from / bs; block * bs < to; ++block) {
      identities.clear();
      const std::size_t end = std::min(to, (block + 1) * bs);
      token_identities(r, block, end - block * bs, identities);
      for (std::size_t pos = std::max(from, block * bs); pos < end; ++pos) {
        writer_->stage(table[block], static_cast<std::uint32_t>(pos % bs), identities[pos - block * bs]);
      }
    }
  }

  /// One decode step of paged attention over some running requests' pages,
  /// taken in turn across checks, compared with their tokens' K/V.
  void check_attention() {
    const std::size_t bs = config_.session.manager.block_size;
    std::vector<AttentionCheck::Sequence> sequences;
    for (std::size_t n = 0; n < running_.size() && sequences.size() < attention_->max_sequences(); ++n) {
      const Request& r = running_[(report_.attention_checks + n) % running_.size()];
      // Decode writes each new token's K/V as it is appended.
      const std::size_t tokens = r.prefilled ? r.sequence.len() : r.computed;
      // The kernel's scratch follows the table's width, which may run ahead of the computed tokens.
      if (tokens == 0 || manager_->block_table(r.owner).size() * bs > AttentionCheck::kMaxTokens) continue;
      AttentionCheck::Sequence& s =
          sequences.emplace_back(AttentionCheck::Sequence{.owner = r.owner, .identities = {}});
      for (std::size_t block = 0; block * bs < tokens; ++block) {
        token_identities(r, block, std::min(bs, tokens - block * bs), s.identities);
      }
    }
    if (sequences.empty()) return;
    const std::uint32_t layer =
        static_cast<std::uint32_t>(report_.attention_checks % session_->pool().layout().geometry().layers);
    const auto bad = attention_->run(sequences, layer, config_.seed ^ report_.steps);
    ++report_.attention_checks;
    report_.attention_sequences += sequences.size();
    report_.attention_mismatches += bad.size();
  }

  /// The next decode token's attention in every attention group, over some
  /// running requests (taken in turn), through the groups' real tables.
  void check_group_attention() {
    std::vector<GroupAttentionCheck::Sequence> sequences;
    for (std::size_t n = 0; n < running_.size() && sequences.size() < config_.attention_check_sequences; ++n) {
      const Request& r = running_[(report_.attention_checks + n) % running_.size()];
      const std::size_t written = r.prefilled ? r.sequence.len() : r.computed;
      if (written > 0) {
        sequences.push_back({.owner = r.owner, .sequence = &r.sequence, .length = written, .decoding = r.prefilled});
      }
    }
    if (sequences.empty()) return;
    std::size_t checked = 0;
    for (auto& [group, check] : group_attention_) {
      const std::uint32_t layers = group_check_->kv_fill(group)->pages().layers;
      const auto outcome = check->run(sequences, static_cast<std::uint32_t>(report_.attention_checks % layers),
                                      config_.seed ^ report_.steps ^ group);
      group_check_->count_attention(group, outcome.checked, outcome.mismatched.size());
      report_.attention_sequences += outcome.checked;
      report_.attention_mismatches += outcome.mismatched.size();
      checked += outcome.checked;
    }
    if (checked > 0) ++report_.attention_checks;
  }

  /// The first `hits` blocks were reused: their pages must hold their tokens' K/V.
  void verify_reused(const Request& r, std::size_t hits) {
    if (config_.verify == VerifyMode::Off || hits == 0) return;
    if (group_check_) {
      const std::size_t before = group_check_->pages_verified();
      const auto bad = group_check_->verify(r.owner, r.sequence, hits * hash_unit_,
                                            config_.verify == VerifyMode::Full ? 1 : config_.sample_every);
      report_.pages_verified += group_check_->pages_verified() - before;
      report_.mismatches += bad.size();
      if (!bad.empty() && !report_.first_bad_page) report_.first_bad_page = bad.front().value();
      return;
    }
    const std::size_t bs = config_.session.manager.block_size;
    const auto table = manager_->block_table(r.owner);
    std::vector<PageId> pages;
    std::vector<std::uint64_t>& identities = identity_buffer_;
    identities.clear();
    for (std::size_t i = 0; i < hits; ++i) {
      if (config_.verify == VerifyMode::Sample && i % config_.sample_every != 0 && i + 1 != hits) continue;
      pages.push_back(table[i]);
      token_identities(r, i, bs, identities);
    }
    const auto bad = writer_->find_mismatches(pages, identities);
    report_.pages_verified += pages.size();
    report_.mismatches += bad.size();
    if (!bad.empty() && !report_.first_bad_page) report_.first_bad_page = bad.front().value();
  }

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

}  // namespace

VerifyMode parse_verify_mode(const std::string& name) {
  if (name == "off") return VerifyMode::Off;
  if (name == "sample") return VerifyMode::Sample;
  if (name == "full") return VerifyMode::Full;
  throw ConfigError("verify must be off, sample or full, not '" + name + "'");
}

ReplayReport replay(memory::Runtime& runtime, const ReplayConfig& config, const std::vector<TraceRequest>& requests) {
  return Replay(runtime, config, requests).run();
}

RouteMode parse_route_mode(const std::string& name) {
  if (name == "round_robin") return RouteMode::RoundRobin;
  if (name == "hash") return RouteMode::Hash;
  throw ConfigError("route must be round_robin or hash, not '" + name + "'");
}

std::vector<ReplayReport> replay_instances(memory::Runtime& runtime, const ReplayConfig& config,
                                           const std::vector<TraceRequest>& requests) {
  const std::size_t n = config.instances;
  if (n == 0 || n > 64) throw ConfigError("instances must be in 1..64");
  if (!config.instance_outputs.empty() && config.instance_outputs.size() != n) {
    throw ConfigError(std::to_string(config.instance_outputs.size()) + " instance outputs for " + std::to_string(n) +
                      " instances");
  }
  if (n == 1 && config.instance_outputs.empty()) return {replay(runtime, config, requests)};
  if (config.step_end || config.observe_metrics) {
    throw ConfigError("several instances publish their KV events and metrics each (instance_outputs)");
  }
  std::vector<std::vector<TraceRequest>> parts(n);
  std::vector<std::vector<std::size_t>> indexes(n);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const TraceRequest& r = requests[i];
    // Hash: the first prompt block's id, mixed (ids are small consecutive integers).
    const std::size_t to = config.route == RouteMode::RoundRobin || r.hash_ids.empty()
                               ? i % n
                               : static_cast<std::size_t>((r.hash_ids.front() * 0x9E3779B97F4A7C15ULL) >> 32) % n;
    parts[to].push_back(r);
    indexes[to].push_back(i);
  }
  std::vector<std::unique_ptr<Replay>> replays;
  for (std::size_t i = 0; i < n; ++i) {
    ReplayConfig each = config;
    each.progress = nullptr;
    each.instance_outputs.clear();
    each.session.manager.dp_rank += static_cast<std::uint32_t>(i);  // a data-parallel rank each, as vLLM's DP engines
    // A disk tier is one process's file: each instance keeps its own, in a directory of its own.
    if (each.session.disk) each.session.disk->path /= "instance-" + std::to_string(i);
    if (!config.instance_outputs.empty()) {
      const ReplayConfig::InstanceOutputs& own = config.instance_outputs[i];
      each.session.event_sinks.insert(each.session.event_sinks.end(), own.event_sinks.begin(), own.event_sinks.end());
      each.step_end = own.step_end;
      each.observe_metrics = own.observe_metrics;
    }
    replays.push_back(std::make_unique<Replay>(runtime, each, parts[i], std::move(indexes[i])));
  }
  // In virtual time: the instance furthest behind steps next, so no instance
  // sees what another publishes "later".
  for (;;) {
    Replay* next = nullptr;
    for (const auto& r : replays) {
      if (!r->finished() && (next == nullptr || r->now() < next->now())) next = r.get();
    }
    if (next == nullptr) break;
    next->advance();
    if (config.progress) {
      std::size_t done = 0;
      for (const auto& r : replays) done += r->requests_done();
      config.progress(done, requests.size());
    }
  }
  std::vector<ReplayReport> reports;
  for (const auto& r : replays) reports.push_back(r->finish());
  return reports;
}

}  // namespace kvtier::replay
