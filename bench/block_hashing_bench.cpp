// Block hashing throughput: XXH3 should keep identity computation far from
// being a bottleneck of the allocator. Reported as tokens per second.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/block_hash.hpp"

namespace {

std::vector<kvtier::TokenId> make_tokens(std::size_t count) {
  std::vector<kvtier::TokenId> tokens(count);
  std::iota(tokens.begin(), tokens.end(), 1000U);
  return tokens;
}

void report_tokens(benchmark::State& state, std::size_t tokens_per_iteration) {
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * tokens_per_iteration), benchmark::Counter::kIsRate);
}

// Local hash of one block.
void BM_LocalBlockHash(benchmark::State& state) {
  const auto tokens = make_tokens(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(kvtier::compute_local_block_hash(tokens));
  report_tokens(state, tokens.size());
}
BENCHMARK(BM_LocalBlockHash)->Arg(16)->Arg(64)->Arg(512);

// Local + chained sequence hashes of a whole prompt (what a router or replay does).
void BM_PromptBlockHashes(benchmark::State& state) {
  const std::size_t block_size = static_cast<std::size_t>(state.range(0));
  const auto tokens = make_tokens(16384);
  std::vector<kvtier::BlockHashes> out(tokens.size() / block_size);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kvtier::hash_full_blocks(tokens, block_size, std::nullopt, out));
    benchmark::ClobberMemory();
  }
  report_tokens(state, tokens.size());
}
BENCHMARK(BM_PromptBlockHashes)->Arg(16)->Arg(64);

// A request as the allocator sees it: hashes, PLHs and block identities.
void BM_ActiveSequenceFromPrompt(benchmark::State& state) {
  const auto tokens = make_tokens(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    kvtier::ActiveSequence sequence(tokens, kvtier::ActiveSequenceConfig{.block_size = 16,
                                                                         .max_output_tokens = 0,
                                                                         .enable_prefix_caching = true,
                                                                         .emit_token_ids = false,
                                                                         .planned_output = {},
                                                                         .seed = std::nullopt});
    benchmark::DoNotOptimize(sequence.blocks().data());
  }
  report_tokens(state, tokens.size());
}
BENCHMARK(BM_ActiveSequenceFromPrompt)->Arg(2048)->Arg(16384);

}  // namespace
