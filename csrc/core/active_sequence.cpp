#include "kvtier/core/active_sequence.hpp"

#include <algorithm>

#include "kvtier/core/checked_arithmetic.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier {
namespace {

// Seeds each sequence's engine without touching /dev/urandom per request.
std::uint64_t next_sequence_seed() {
  thread_local std::mt19937_64 seeds{std::random_device{}()};
  return seeds();
}

}  // namespace

ActiveSequence::ActiveSequence(std::vector<TokenId> prompt, ActiveSequenceConfig config)
    : config_(std::move(config)), tokens_(std::move(prompt)), rng_(config_.seed.value_or(next_sequence_seed())) {
  KVTIER_EXPECTS(config_.block_size >= 2, "block_size must be at least 2, got " + std::to_string(config_.block_size));
  if (!config_.enable_prefix_caching) config_.emit_token_ids = false;
  // Every token count below is at most this sum: it must not wrap.
  const auto total = checked_add(tokens_.size(), config_.max_output_tokens);
  KVTIER_EXPECTS(total && *total <= kMaxSequenceTokens,
                 "a sequence of " + std::to_string(tokens_.size()) + " prompt and " +
                     std::to_string(config_.max_output_tokens) + " output tokens is longer than the " +
                     std::to_string(kMaxSequenceTokens) + " tokens a sequence may have");
  num_input_tokens_ = tokens_.size();
  const std::size_t full_blocks = tokens_.size() / config_.block_size;
  // Room for the prompt and some output up front; a long output grows the vector as it comes.
  constexpr std::size_t kReservedOutputTokens = 4096;
  blocks_.reserve(
      ceil_div(tokens_.size() + std::min(config_.max_output_tokens, kReservedOutputTokens), config_.block_size));
  for (std::size_t i = 0; i < full_blocks; ++i) append_full_block(i);
  if (tokens_.size() % config_.block_size != 0) blocks_.push_back(UniqueBlock::partial(Uuid::random()));
}

std::uint64_t ActiveSequence::random_u64() { return rng_(); }

std::vector<TokenId> ActiveSequence::block_tokens(std::size_t block_index) const {
  const auto first = tokens_.begin() + static_cast<std::ptrdiff_t>(block_index * config_.block_size);
  return {first, first + static_cast<std::ptrdiff_t>(config_.block_size)};
}

void ActiveSequence::append_full_block(std::size_t block_index) {
  const std::optional<SequenceHash> parent =
      block_index == 0 ? std::nullopt : std::optional<SequenceHash>(blocks_[block_index - 1].hash());
  SequenceHash hash;
  FullBlockInfo info;
  if (config_.enable_prefix_caching) {
    const std::span<const TokenId> span(tokens_.data() + block_index * config_.block_size, config_.block_size);
    info.local = compute_local_block_hash(span);
    hash = compute_sequence_hash(parent, info.local);
    info.plh = PositionalLineageHash(hash, parent, block_index);
  } else {
    // Random identities: no cross-request reuse, and no lineage to link.
    hash = SequenceHash(random_u64());
    info.local = LocalBlockHash(0);
    info.plh = PositionalLineageHash(hash, std::nullopt, block_index);
  }
  if (block_index < blocks_.size()) {
    blocks_[block_index] = UniqueBlock::full(hash);
  } else {
    blocks_.push_back(UniqueBlock::full(hash));
  }
  full_.push_back(info);
}

PromoteSignal ActiveSequence::promote_tail() {
  const std::size_t index = blocks_.size() - 1;
  const Uuid uuid = blocks_[index].uuid();
  append_full_block(index);
  PromoteSignal promote{
      .uuid = uuid,
      .hash = blocks_[index].hash(),
      .parent = index == 0 ? std::nullopt : std::optional<SequenceHash>(blocks_[index - 1].hash()),
      .local = full_[index].local,
      .plh = full_[index].plh,
      .token_ids = std::nullopt,
  };
  if (config_.emit_token_ids) promote.token_ids = block_tokens(index);
  return promote;
}

std::size_t ActiveSequence::blocks_covering(std::size_t tokens) const noexcept {
  return std::min(ceil_div(tokens, config_.block_size), blocks_.size());
}

std::optional<UseSignal> ActiveSequence::prepare_allocation(std::size_t cumulative_tokens) const {
  const std::size_t prev = blocks_covering(allocated_tokens_);
  const std::size_t target = blocks_covering(cumulative_tokens);
  if (target <= prev) return std::nullopt;
  UseSignal use;
  use.blocks.assign(blocks_.begin() + static_cast<std::ptrdiff_t>(prev),
                    blocks_.begin() + static_cast<std::ptrdiff_t>(target));
  const std::size_t full_end = std::min(target, full_.size());
  for (std::size_t i = prev; i < full_end; ++i) {
    if (config_.enable_prefix_caching) use.local_hashes.push_back(full_[i].local);
    use.plhs.push_back(full_[i].plh);
  }
  if (config_.emit_token_ids && full_end > prev) {
    use.token_ids.emplace();
    for (std::size_t i = prev; i < full_end; ++i) use.token_ids->push_back(block_tokens(i));
  }
  if (prev > 0) use.parent = blocks_[prev - 1];
  return use;
}

std::optional<UseSignal> ActiveSequence::take_creation_signal() {
  auto use = prepare_allocation(len());
  commit_allocation(len());
  return use;
}

std::vector<MoveBlock> ActiveSequence::push(TokenId token) {
  tokens_.push_back(token);
  ++generated_;
  std::vector<MoveBlock> signals;
  if (tokens_.size() % config_.block_size == 1) {
    // First token of a new block: the previous partial is full now.
    if (!blocks_.empty() && blocks_.back().is_partial()) signals.emplace_back(promote_tail());
    blocks_.push_back(UniqueBlock::partial(Uuid::random()));
    UseSignal use;
    use.blocks.push_back(blocks_.back());
    signals.emplace_back(std::move(use));
  }
  if (generated_ == config_.max_output_tokens) {
    DerefSignal deref;
    deref.blocks.assign(blocks_.rbegin(), blocks_.rend());
    signals.emplace_back(std::move(deref));
  }
  return signals;
}

std::vector<MoveBlock> ActiveSequence::generate() {
  if (planned_cursor_ < config_.planned_output.size()) return push(config_.planned_output[planned_cursor_++]);
  return push(static_cast<TokenId>(random_u64()));
}

void ActiveSequence::pop() {
  KVTIER_EXPECTS(generated_ != 0, "pop: the sequence has no generated token to undo");
  tokens_.pop_back();
  --generated_;
  if (planned_cursor_ > generated_) planned_cursor_ = generated_;
  if (tokens_.size() % config_.block_size == 0 && !blocks_.empty() && blocks_.back().is_partial()) {
    blocks_.pop_back();
  }
}

bool ActiveSequence::promotes_computed_tail(std::size_t computed_tokens) const noexcept {
  return computed_tokens != 0 && computed_tokens == len() && computed_tokens % config_.block_size == 0 &&
         !blocks_.empty() && blocks_.back().is_partial();
}

std::optional<PromoteSignal> ActiveSequence::promote_computed_tail(std::size_t computed_tokens) {
  if (!promotes_computed_tail(computed_tokens)) return std::nullopt;
  return promote_tail();
}

std::optional<DerefSignal> ActiveSequence::free_signal() const {
  const std::size_t count = blocks_covering(allocated_tokens_);
  if (count == 0) return std::nullopt;
  DerefSignal deref;
  deref.blocks.assign(std::make_reverse_iterator(blocks_.begin() + static_cast<std::ptrdiff_t>(count)), blocks_.rend());
  return deref;
}

std::optional<DerefSignal> ActiveSequence::reset_with_signal() {
  auto deref = free_signal();
  allocated_tokens_ = 0;
  return deref;
}

std::size_t ActiveSequence::current_known_blocks() const noexcept { return ceil_div(len(), config_.block_size); }

std::size_t ActiveSequence::to_completion_blocks() const noexcept {
  return ceil_div(num_input_tokens_ + config_.max_output_tokens, config_.block_size);
}

}  // namespace kvtier
