#include "g1/common/destination_prompt.hpp"

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1::detail {

DestinationPrompt DestinationPrompt::of(const ActiveSequence& sequence, std::uint32_t block_size) {
  KVTIER_EXPECTS(sequence.block_size() == block_size, "sequence block size differs from the manager's");
  const std::size_t prompt_blocks = (sequence.num_input_tokens() + block_size - 1) / block_size;
  DestinationPrompt prompt;
  prompt.blocks.assign(sequence.blocks().begin(),
                       sequence.blocks().begin() + static_cast<std::ptrdiff_t>(prompt_blocks));
  while (prompt.full < prompt_blocks && prompt.blocks[prompt.full].is_full()) {
    if (sequence.enable_prefix_caching()) prompt.local_hashes.push_back(sequence.local_hash(prompt.full));
    ++prompt.full;
  }
  if (sequence.emits_token_ids()) {  // implies prefix caching
    prompt.token_ids.emplace();
    for (std::size_t i = 0; i < prompt.full; ++i) {
      const auto first = sequence.tokens().begin() + static_cast<std::ptrdiff_t>(i * block_size);
      prompt.token_ids->emplace_back(first, first + block_size);
    }
  }
  return prompt;
}

}  // namespace kvtier::g1::detail
