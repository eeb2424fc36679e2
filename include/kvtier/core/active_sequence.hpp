#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "kvtier/core/move_block.hpp"

namespace kvtier {

/// The most tokens (prompt and output) one sequence may have: far beyond any
/// model's context, and small enough that no block or token count wraps.
inline constexpr std::size_t kMaxSequenceTokens = std::size_t{1} << 40;

/// Settings of one request's block sequence (Dynamo's `ActiveSequence` arguments).
struct ActiveSequenceConfig {
  std::size_t block_size = 64;
  std::size_t max_output_tokens = 0;
  bool enable_prefix_caching = true;
  /// Attach per-block token ids to signals; forced off when caching is off.
  bool emit_token_ids = false;
  /// Output tokens `generate()` appends, in order, before falling back to random ids.
  std::vector<TokenId> planned_output{};
  /// Seeds the random identities (caching off) and random output tokens, so a
  /// script replays byte for byte; unset, every sequence draws a fresh seed.
  std::optional<std::uint64_t> seed{};
};

/// A request as a list of blocks and the MoveBlock signals that drive a G1
/// manager (docs/semantics.md §6.1). Full blocks carry their sequence hash, local hash and
/// PLH; the trailing partial block (if any) a random UUID. With prefix caching
/// off, full blocks get random identities that the sequence keeps, so a
/// preempted request re-admits onto its own blocks.
class ActiveSequence {
 public:
  /// Throws ContractError when block_size < 2 or the prompt and max_output_tokens
  /// together exceed kMaxSequenceTokens.
  ActiveSequence(std::vector<TokenId> prompt, ActiveSequenceConfig config);

  std::size_t len() const noexcept { return tokens_.size(); }
  std::size_t num_input_tokens() const noexcept { return num_input_tokens_; }
  std::size_t generated_tokens() const noexcept { return generated_; }
  std::size_t max_output_tokens() const noexcept { return config_.max_output_tokens; }
  std::size_t block_size() const noexcept { return config_.block_size; }
  bool enable_prefix_caching() const noexcept { return config_.enable_prefix_caching; }
  bool emits_token_ids() const noexcept { return config_.emit_token_ids; }
  std::span<const TokenId> tokens() const noexcept { return tokens_; }
  std::span<const UniqueBlock> blocks() const noexcept { return blocks_; }
  std::size_t full_block_count() const noexcept { return full_.size(); }
  /// Local hash of full block i (0 when caching is off).
  LocalBlockHash local_hash(std::size_t i) const { return full_.at(i).local; }
  PositionalLineageHash plh(std::size_t i) const { return full_.at(i).plh; }
  std::size_t num_allocated_tokens() const noexcept { return allocated_tokens_; }
  bool is_complete() const noexcept { return generated_ >= config_.max_output_tokens; }
  /// Whether generate() still has a planned output token to append.
  bool has_planned_output() const noexcept { return planned_cursor_ < config_.planned_output.size(); }

  /// The Use that allocating up to `cumulative_tokens` needs (pure; nullopt when
  /// nothing new is needed). A block counts as full if the sequence has all its
  /// tokens, even when the chunk ends inside it.
  std::optional<UseSignal> prepare_allocation(std::size_t cumulative_tokens) const;
  /// Moves the allocation watermark; call only after the Use succeeded.
  void commit_allocation(std::size_t cumulative_tokens) noexcept { allocated_tokens_ = cumulative_tokens; }
  /// prepare + commit for the whole current length.
  std::optional<UseSignal> take_creation_signal();

  /// Appends one token. Opening a new block lazily promotes the previous
  /// partial and emits Use of the new partial; the last planned output token
  /// appends the Deref of every block.
  std::vector<MoveBlock> push(TokenId token);
  /// push() of the next planned output token, or of a random token.
  std::vector<MoveBlock> generate();
  /// Undoes the last generated token (drops a partial that held only it).
  void pop();
  /// Promotes the trailing partial now when exactly `computed_tokens == len()`
  /// fill it (a non-zero multiple of block_size).
  std::optional<PromoteSignal> promote_computed_tail(std::size_t computed_tokens);
  /// Whether promote_computed_tail(computed_tokens) would promote (pure).
  bool promotes_computed_tail(std::size_t computed_tokens) const noexcept;

  /// Deref of the allocated blocks, leaf first (nullopt when nothing is allocated).
  std::optional<DerefSignal> free_signal() const;
  /// Preemption: free_signal() and watermark := 0; generated tokens are kept.
  std::optional<DerefSignal> reset_with_signal();

  std::size_t current_known_blocks() const noexcept;
  std::size_t to_completion_blocks() const noexcept;

 private:
  struct FullBlockInfo {
    LocalBlockHash local;
    PositionalLineageHash plh;
  };

  std::size_t blocks_covering(std::size_t tokens) const noexcept;
  /// Identity of the block that ends at token `end` (exclusive), given its parent.
  void append_full_block(std::size_t block_index);
  PromoteSignal promote_tail();
  std::vector<TokenId> block_tokens(std::size_t block_index) const;
  std::uint64_t random_u64();

  ActiveSequenceConfig config_;
  std::vector<TokenId> tokens_;
  std::vector<UniqueBlock> blocks_;
  std::vector<FullBlockInfo> full_;
  std::size_t num_input_tokens_ = 0;
  std::size_t generated_ = 0;
  std::size_t planned_cursor_ = 0;
  std::size_t allocated_tokens_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kvtier
