#include "replay_run.hpp"

#include <algorithm>

#include "kvtier/core/checked_arithmetic.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/replay/prefill_chunk.hpp"
#include "kvtier/replay/tier_report.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/session/shared_tier_factory.hpp"

namespace kvtier::replay {
namespace {

/// Whether a request of `tokens` (prompt and output) fits in G1 alone: its
/// blocks and the one a decode step may add.
bool fits_g1(std::size_t tokens, const ReplayConfig& config) {
  const std::uint32_t bs = config.session.manager.block_size;
  return (tokens + bs - 1) / bs + 1 <= config.session.manager.capacity;
}

}  // namespace

Replay::Replay(memory::Runtime& runtime, const ReplayConfig& config, const std::vector<TraceRequest>& requests,
               std::vector<std::size_t> trace_index)
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
    // With groups a request's pages depend on its groups' windows: one that
    // never fits is refused when it is alone and still does not.
    if (!grouped && !config.refuse_oversized && !fits_g1(*tokens, config)) {
      const std::size_t blocks = (*tokens + bs - 1) / bs + 1;
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

ReplayReport Replay::run() {
  while (!finished()) advance();
  return finish();
}

void Replay::advance() {
  while (next_arrival_ < requests_.size() && requests_[next_arrival_].timestamp_ms <= now_) arrive();
  if (waiting_.empty() && running_.empty()) {
    // Idle: jump to the next arrival. None left when the last ones were refused as they arrived
    // (longer than max_model_len or than G1): the replay is over.
    if (next_arrival_ < requests_.size()) now_ = requests_[next_arrival_].timestamp_ms;
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

ReplayReport Replay::finish() {
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
    if (const tiers::LowerTier* disk = engine_->lower_tier(StorageTier::Disk)) read_disk_tier(*engine_, *disk, report_);
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

metrics::KvMetrics Replay::kv_metrics() const {
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

void Replay::arrive() {
  const TraceRequest& trace = requests_[next_arrival_];
  ++report_.requests;
  const std::size_t output = config_.output_tokens.value_or(trace.output_length);
  if (config_.max_model_len && trace.input_length + output > *config_.max_model_len) {
    ++report_.rejected_requests;  // vLLM refuses a request past max_model_len
    ++next_arrival_;
    return;
  }
  if (!grouped_ && !fits_g1(trace.input_length + output, config_)) {
    ++report_.rejected_requests;  // vLLM refuses a request no G1 of this size can hold, and serves the rest
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

void Replay::step() {
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

bool Replay::preempt_other(std::size_t keep) {
  for (std::size_t i = running_.size(); i-- > 0;) {
    if (i == keep) continue;
    preempt(i);
    return true;
  }
  return false;
}

void Replay::preempt(std::size_t i) {
  Request r = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  release(r);
  r.computed = 0;
  r.prefilled = false;
  ++report_.preemptions;
  waiting_.push_front(std::move(r));
}

void Replay::record_step(const Request& r, std::size_t tokens, bool counted) {
  if (!config_.record_prefix_steps) return;
  report_.prefix_steps.push_back(PrefixStep{.request = trace_index_.empty() ? r.index : trace_index_[r.index],
                                            .blocks = std::min(tokens, r.prompt_length) / hash_unit_,
                                            .counted = counted});
}

Replay::Outcome Replay::wait(std::size_t i) {
  Request deferred = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  waiting_.push_front(std::move(deferred));
  return Outcome::Preempted;
}

void Replay::reject(std::size_t i) {
  Request r = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  release(r);
  ++report_.rejected_requests;
}

void Replay::maybe_inject_fault() {
  if (config_.copy_fault_one_in > 0 && fault_rng_() % config_.copy_fault_one_in == 0) engine_->inject_copy_fault(1);
}

bool Replay::allocate(std::size_t& index, std::size_t tokens) {
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

Replay::Outcome Replay::prefill(std::size_t index, std::size_t& budget) {
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
    record_step(r, r.prompt_length, !r.admitted_before);  // the lookup, and what the admission swapped in
    if (!r.admitted_before) {                             // hit rates count a request's first admission
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
    finish_chunk(r, hit_tokens, admission.allocated_to, budget, false);
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

void Replay::finish_chunk(Request& r, std::size_t from, std::size_t to, std::size_t& budget, bool record) {
  if (record && std::min(to, r.prompt_length) / hash_unit_ > std::min(from, r.prompt_length) / hash_unit_) {
    record_step(r, to, false);
  }
  write_tokens(r, from, to);
  driver().finalize(r.owner, r.sequence, from, to);
  ++report_.allocator_ops;
  budget -= std::min(budget, to - from);
  r.computed = to;
}

Replay::Outcome Replay::decode(Request& r) {
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

void Replay::release(Request& r) {
  writer_->flush();
  driver().release(r.owner, r.sequence);
  ++report_.allocator_ops;
}

}  // namespace kvtier::replay
