#pragma once
// An online policy measured with the tiers under G1 (`kvtier bench policy
// --host-blocks`): the trace replayed one request at a time through a real
// session on the host runtime — G1 in the policy's order, a G2 of pinned
// pages, a G3 on disk — one 512-token page a trace block, every reused page's
// bytes checked. What each tier served, wrote and read back.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "kvtier/measure/online_policy_run.hpp"
#include "kvtier/offload/tier_admission.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::measure {

struct PolicyStack {
  std::uint32_t host_blocks = 0;   // G2 pages (> 0)
  std::uint32_t disk_blocks = 0;   // G3 blocks (0: no G3)
  std::filesystem::path disk_dir;  // a fresh G3 file goes in a subdirectory per run, removed after
  offload::TierAdmission g2_admission = offload::TierAdmission::All;
  offload::TierAdmission g3_admission = offload::TierAdmission::All;
};

struct StackHits {
  std::size_t g1 = 0;  // prompt blocks hit in each tier
  std::size_t g2 = 0;
  std::size_t g3 = 0;
  std::size_t g2_bytes_written = 0;  // swap-outs
  std::size_t g2_bytes_read = 0;     // swap-ins
  std::size_t g3_bytes_written = 0;
  std::size_t g3_bytes_read = 0;
  std::size_t mismatches = 0;  // reused pages whose bytes differed (0 unless something is broken)
  std::size_t hits() const noexcept { return g1 + g2 + g3; }
};

/// Replays `requests` (each cut to its first `capacity` blocks, as the G1-only
/// run holds them) with the policy's G1 of `capacity` pages over `stack`.
/// ConfigError for an impossible stack.
StackHits run_policy_in_stack(const std::vector<replay::TraceRequest>& requests, const OnlinePolicy& policy,
                              std::size_t capacity, const PolicyStack& stack);

}  // namespace kvtier::measure
