// Several instances' reports as one: counts summed, rates from the sums,
// bandwidths weighted by bytes.
#include <algorithm>
#include <initializer_list>
#include <utility>

#include "kvtier/replay/replayer.hpp"

namespace kvtier::replay {

ReplayReport combine(const std::vector<ReplayReport>& reports) {
  ReplayReport total;
  // Byte-weighted bandwidth: the sum of bytes over the sum of each one's busy time.
  double swap_out_s = 0.0;
  double swap_in_s = 0.0;
  double g3_write_s = 0.0;
  double g3_read_s = 0.0;
  double g4_fetch_s = 0.0;
  const auto busy = [](std::size_t bytes, double gbps) { return gbps > 0.0 ? double(bytes) / gbps / 1e9 : 0.0; };
  const auto rate = [](std::size_t bytes, double seconds) {
    return seconds > 0.0 ? double(bytes) / seconds / 1e9 : 0.0;
  };
  for (const ReplayReport& r : reports) {
    using Field = std::pair<std::size_t*, std::size_t>;
    for (const auto& [sum, part] :
         std::initializer_list<Field>{{&total.requests, r.requests},
                                      {&total.rejected_requests, r.rejected_requests},
                                      {&total.running_request_steps, r.running_request_steps},
                                      {&total.prompt_tokens, r.prompt_tokens},
                                      {&total.generated_tokens, r.generated_tokens},
                                      {&total.steps, r.steps},
                                      {&total.prompt_blocks, r.prompt_blocks},
                                      {&total.g1_hit_blocks, r.g1_hit_blocks},
                                      {&total.g2_hit_blocks, r.g2_hit_blocks},
                                      {&total.g3_hit_blocks, r.g3_hit_blocks},
                                      {&total.g4_hit_blocks, r.g4_hit_blocks},
                                      {&total.preemptions, r.preemptions},
                                      {&total.evictions, r.evictions},
                                      {&total.swap_outs, r.swap_outs},
                                      {&total.swap_ins, r.swap_ins},
                                      {&total.swap_out_bytes, r.swap_out_bytes},
                                      {&total.swap_in_bytes, r.swap_in_bytes},
                                      {&total.kv_tokens_written, r.kv_tokens_written},
                                      {&total.kv_bytes_written, r.kv_bytes_written},
                                      {&total.failed_copies, r.failed_copies},
                                      {&total.g2_admission_declined, r.g2_admission_declined},
                                      {&total.g3_admission_declined, r.g3_admission_declined},
                                      {&total.g4_admission_declined, r.g4_admission_declined},
                                      {&total.g3_recovered_blocks, r.g3_recovered_blocks},
                                      {&total.g3_blocks_written, r.g3_blocks_written},
                                      {&total.g3_blocks_read, r.g3_blocks_read},
                                      {&total.g3_bytes_written, r.g3_bytes_written},
                                      {&total.g3_bytes_read, r.g3_bytes_read},
                                      {&total.g3_checksum_failures, r.g3_checksum_failures},
                                      {&total.g3_io_failures, r.g3_io_failures},
                                      {&total.g3_demotions_refused, r.g3_demotions_refused},
                                      {&total.g3_authentication_failures, r.g3_authentication_failures},
                                      {&total.g3_slots_torn, r.g3_slots_torn},
                                      {&total.g3_slots_superseded, r.g3_slots_superseded},
                                      {&total.g3_slots_unauthenticated, r.g3_slots_unauthenticated},
                                      {&total.g3_dropped_on_shrink, r.g3_dropped_on_shrink},
                                      {&total.g3_discarded_by_reformat, r.g3_discarded_by_reformat},
                                      {&total.g3_parked_slots, r.g3_parked_slots},
                                      {&total.g4_blocks_published, r.g4_blocks_published},
                                      {&total.g4_already_present, r.g4_already_present},
                                      {&total.g4_publishes_refused, r.g4_publishes_refused},
                                      {&total.g4_blocks_fetched, r.g4_blocks_fetched},
                                      {&total.g4_bytes_fetched, r.g4_bytes_fetched},
                                      {&total.g4_lookups, r.g4_lookups},
                                      {&total.g4_values_missing, r.g4_values_missing},
                                      {&total.g4_checksum_failures, r.g4_checksum_failures},
                                      {&total.g4_errors, r.g4_errors},
                                      {&total.g4_authentication_failures, r.g4_authentication_failures},
                                      {&total.g4_other_version, r.g4_other_version},
                                      {&total.g4_oversized, r.g4_oversized},
                                      {&total.g4_answered, r.g4_answered},
                                      {&total.g4_read_only, r.g4_read_only},
                                      {&total.allocator_ops, r.allocator_ops},
                                      {&total.pages_verified, r.pages_verified},
                                      {&total.mismatches, r.mismatches},
                                      {&total.attention_checks, r.attention_checks},
                                      {&total.attention_sequences, r.attention_sequences},
                                      {&total.attention_mismatches, r.attention_mismatches}}) {
      *sum += part;
    }
    swap_out_s += busy(r.swap_out_bytes, r.swap_out_gbps);
    swap_in_s += busy(r.swap_in_bytes, r.swap_in_gbps);
    g3_write_s += busy(r.g3_bytes_written, r.g3_write_gbps);
    g3_read_s += busy(r.g3_bytes_read, r.g3_read_gbps);
    g4_fetch_s += busy(r.g4_bytes_fetched, r.g4_fetch_gbps);
    if (!total.first_bad_page) total.first_bad_page = r.first_bad_page;
    total.peak_running = std::max(total.peak_running, r.peak_running);  // a floor of the instances' sum
    if (total.groups.empty()) {
      total.groups = r.groups;
    } else {
      for (std::size_t g = 0; g < std::min(total.groups.size(), r.groups.size()); ++g) {
        GroupReplayCounts& sum = total.groups[g];
        const GroupReplayCounts& part = r.groups[g];
        sum.hit_pages += part.hit_pages;
        sum.fresh_pages += part.fresh_pages;
        sum.stored_blocks += part.stored_blocks;
        sum.removed_blocks += part.removed_blocks;
        sum.pages_written += part.pages_written;
        sum.pages_verified += part.pages_verified;
        sum.mismatches += part.mismatches;
      }
    }
    total.virtual_ms = std::max(total.virtual_ms, r.virtual_ms);
    total.wall_seconds = std::max(total.wall_seconds, r.wall_seconds);
  }
  total.swap_out_gbps = rate(total.swap_out_bytes, swap_out_s);
  total.swap_in_gbps = rate(total.swap_in_bytes, swap_in_s);
  total.g3_write_gbps = rate(total.g3_bytes_written, g3_write_s);
  total.g3_read_gbps = rate(total.g3_bytes_read, g3_read_s);
  total.g4_fetch_gbps = rate(total.g4_bytes_fetched, g4_fetch_s);
  return total;
}

}  // namespace kvtier::replay
