// What checks the pages a replay fills: every computed token's K/V into its
// slot, reused pages against their tokens' K/V, and paged attention through
// the device block tables (plain pages, or each attention group's).
#include <algorithm>

#include "kvtier/core/page_pattern.hpp"
#include "replay_run.hpp"

namespace kvtier::replay {

void Replay::token_identities(const Request& r, std::size_t block, std::size_t count,
                              std::vector<std::uint64_t>& out) const {
  const std::size_t bs = config_.session.manager.block_size;
  const auto tokens = r.sequence.tokens();
  const std::uint64_t parent = block == 0 ? 0 : r.sequence.blocks()[block - 1].hash().value();
  std::uint64_t identity = token_kv_identity(parent, {});
  for (std::size_t t = 0; t < count; ++t) {
    identity = page_pattern_word(identity, tokens[block * bs + t]);
    out.push_back(identity);
  }
}

void Replay::write_tokens(const Request& r, std::size_t from, std::size_t to) {
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

void Replay::check_attention() {
  const std::size_t bs = config_.session.manager.block_size;
  std::vector<AttentionCheck::Sequence> sequences;
  for (std::size_t n = 0; n < running_.size() && sequences.size() < attention_->max_sequences(); ++n) {
    const Request& r = running_[(report_.attention_checks + n) % running_.size()];
    // Decode writes each new token's K/V as it is appended.
    const std::size_t tokens = r.prefilled ? r.sequence.len() : r.computed;
    // The kernel's scratch follows the table's width, which may run ahead of the computed tokens.
    if (tokens == 0 || manager_->block_table(r.owner).size() * bs > AttentionCheck::kMaxTokens) continue;
    AttentionCheck::Sequence& s = sequences.emplace_back(AttentionCheck::Sequence{.owner = r.owner, .identities = {}});
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

void Replay::check_group_attention() {
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

void Replay::verify_reused(const Request& r, std::size_t hits) {
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

}  // namespace kvtier::replay
