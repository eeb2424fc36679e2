#include "g1/common/stored_runs.hpp"

namespace kvtier::g1::detail {

void StoredRuns::start_run(const std::optional<SequenceHash>& parent, bool has_local, std::size_t ids_per_block) {
  const std::size_t rest = expected_ > added_ ? expected_ - added_ : 1;  // at most the rest
  run_.parent = parent;
  run_.token_ids.reset();
  run_has_local_ = has_local;
  run_.blocks.reserve(rest);
  if (ids_per_block > 0) {
    run_.token_ids.emplace();
    run_.token_ids->reserve(rest, ids_per_block);
  }
}

}  // namespace kvtier::g1::detail
