#include "kvtier/replay/group_attention_check.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include "kvtier/core/expects.hpp"

namespace kvtier::replay {
namespace {

template <class T>
memory::DeviceBuffer to_device(memory::Runtime& runtime, memory::Stream& stream, const std::vector<T>& host,
                               std::vector<memory::PinnedBuffer>& staging) {
  const std::size_t bytes = std::max<std::size_t>(1, host.size()) * sizeof(T);
  memory::PinnedBuffer& pinned = staging.emplace_back(runtime.allocate_pinned(bytes));
  std::copy(host.begin(), host.end(), static_cast<T*>(pinned.data()));
  memory::DeviceBuffer device = runtime.allocate_device(bytes);
  stream.copy_async(CopyDescriptor{.src = pinned.data(), .dst = device.data(), .bytes = host.size() * sizeof(T)});
  return device;
}

}  // namespace

GroupAttentionCheck::GroupAttentionCheck(session::Session& session, std::size_t group, const GroupKvFill& fill)
    : session_(session), group_(group), fill_(fill) {
  const GroupSpec& spec = session.manager().geometry()->groups().at(group).spec;
  span_ = kernels::attention_span_of(spec.kind);
  window_ = span_ == kernels::AttentionSpan::SlidingWindow  ? spec.sliding_window
            : span_ == kernels::AttentionSpan::ChunkedLocal ? spec.attention_chunk_size
                                                            : 0;
}

GroupAttentionCheck::Outcome GroupAttentionCheck::run(std::span<const Sequence> sequences, std::uint32_t layer,
                                                      std::uint64_t seed) {
  Outcome outcome;
  for (const bool decoding : {false, true}) {
    std::vector<std::size_t> picked;
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      const std::size_t n = sequences[i].length;
      if (sequences[i].decoding != decoding || n == 0) continue;
      // A prefilling request's next token starts a chunk afresh: nothing of the group's to attend to.
      if (!decoding && span_ == kernels::AttentionSpan::ChunkedLocal && n % window_ == 0) continue;
      picked.push_back(i);
    }
    if (!picked.empty()) run_batch(sequences, picked, decoding, layer, seed, outcome);
  }
  return outcome;
}

void GroupAttentionCheck::run_batch(std::span<const Sequence> sequences, const std::vector<std::size_t>& picked,
                                    bool decoding, std::uint32_t layer, std::uint64_t seed, Outcome& outcome) {
  const kernels::GroupPages& pages = fill_.pages();
  const PageFormat& f = pages.format;
  const std::uint32_t bs = f.block_size;
  // The manager keeps what the query attends to: a decoding request's last
  // token and the W - 1 before it; a prefilling one's next token is not
  // written yet, so the W - 1 computed before it.
  const std::uint32_t window = span_ == kernels::AttentionSpan::SlidingWindow && !decoding ? window_ - 1 : window_;
  if (span_ == kernels::AttentionSpan::SlidingWindow && window == 0) return;  // a window of one: the token alone
  const g1::G1Manager& manager = session_.manager();
  std::size_t max_blocks = 1;
  for (const std::size_t i : picked) {
    max_blocks = std::max(max_blocks, manager.block_table(sequences[i].owner, group_).size());
  }
  const std::uint32_t kv_heads = kernels::shared_kv_heads(f);
  const std::uint32_t q_heads = 2 * kv_heads;
  const std::uint32_t in_width = kernels::query_width(f);
  const std::uint32_t out_width = kernels::output_width(f);
  std::vector<std::int32_t> tables(picked.size() * max_blocks, -1);
  std::vector<std::int32_t> lens;
  for (std::size_t s = 0; s < picked.size(); ++s) {
    const auto table = manager.block_table(sequences[picked[s]].owner, group_);
    for (std::size_t b = 0; b < table.size(); ++b) {
      tables[s * max_blocks + b] = static_cast<std::int32_t>(table[b].value());
    }
    lens.push_back(static_cast<std::int32_t>(sequences[picked[s]].length));
  }
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::uniform_real_distribution<float> uniform(-0.25f, 0.25f);
  std::vector<float> query(picked.size() * q_heads * in_width);
  for (float& q : query) q = uniform(rng);

  memory::Runtime& runtime = session_.runtime();
  memory::Stream& stream = session_.compute_stream();
  std::vector<memory::PinnedBuffer> staging;
  memory::DeviceBuffer d_query = to_device(runtime, stream, query, staging);
  memory::DeviceBuffer d_tables = to_device(runtime, stream, tables, staging);
  memory::DeviceBuffer d_lens = to_device(runtime, stream, lens, staging);
  memory::DeviceBuffer d_out = runtime.allocate_device(query.size() / in_width * out_width * sizeof(float));
  const float scale = 1.0f / std::sqrt(static_cast<float>(in_width));
  stream.group_attention_async(
      memory::GroupAttentionDecode{.slab = session_.pool().slab(),
                                   .pages = pages,
                                   .args = {.query = static_cast<const float*>(d_query.data()),
                                            .block_tables = static_cast<const std::int32_t*>(d_tables.data()),
                                            .seq_lens = static_cast<const std::int32_t*>(d_lens.data()),
                                            .out = static_cast<float*>(d_out.data()),
                                            .seqs = static_cast<std::uint32_t>(picked.size()),
                                            .q_heads = q_heads,
                                            .max_blocks = static_cast<std::uint32_t>(max_blocks),
                                            .layer = layer,
                                            .scale = scale,
                                            .span = span_,
                                            .window = window,
                                            .scales = GroupKvFill::scales()}});
  memory::PinnedBuffer out_host = runtime.allocate_pinned(d_out.size());
  stream.copy_async(CopyDescriptor{.src = d_out.data(), .dst = out_host.data(), .bytes = d_out.size()});
  stream.synchronize();
  const auto* got = static_cast<const float*>(out_host.data());

  // Dense attention over the values the pages must hold: each block's reference page, decoded.
  std::vector<float> weights, want(out_width);
  for (std::size_t s = 0; s < picked.size(); ++s) {
    const Sequence& seq = sequences[picked[s]];
    const auto n = static_cast<std::uint32_t>(seq.length);
    const std::uint32_t first = kernels::first_attended_token(span_, window, n);
    const std::size_t blocks = (n + bs - 1) / bs;
    const g1::GroupPatterns patterns = manager.group_patterns(seq.owner, *seq.sequence, group_, 0, blocks);
    std::unordered_map<std::uint32_t, std::uint64_t> identity;
    for (std::size_t i = 0; i < patterns.pages.size(); ++i)
      identity[patterns.pages[i].value()] = patterns.identities[i];
    std::unordered_map<std::size_t, std::vector<std::byte>> block_bytes;
    const auto block_of = [&](std::uint32_t t) -> const std::byte* {
      const std::size_t b = t / bs;
      auto it = block_bytes.find(b);
      if (it == block_bytes.end()) {
        const auto page = static_cast<std::uint32_t>(tables[s * max_blocks + b]);
        const auto id = identity.find(page);
        KVTIER_ASSERT(id != identity.end(), "group ", group_, " attends to block ", b, " on page ", page,
                      ", which the table does not back");
        it = block_bytes.emplace(b, fill_.expected_page(id->second)).first;
      }
      return it->second.data() + std::size_t{layer} * f.layer_page_bytes();
    };
    bool bad = false;
    for (std::uint32_t h = 0; h < q_heads && !bad; ++h) {
      const float* q = query.data() + (s * q_heads + h) * in_width;
      const std::uint32_t kv_head = h / (q_heads / kv_heads);
      const kernels::LayerScales sc = GroupKvFill::scales();
      weights.clear();
      double top = -INFINITY;
      for (std::uint32_t t = first; t < n; ++t) {
        const std::byte* block = block_of(t);
        double dot = 0;
        if (f.content == PageContent::MlaLatent) {
          for (std::uint32_t i = 0; i < f.latent_dim; ++i)
            dot += q[i] * kernels::load_mla_latent(block, f, t % bs, i, sc.key);
          for (std::uint32_t i = 0; i < f.rope_dim; ++i) {
            dot += q[f.latent_dim + i] * kernels::load_mla_rope(block, f, t % bs, i, sc.key);
          }
        } else {
          for (std::uint32_t d = 0; d < f.head_dim; ++d) {
            dot += q[d] * kernels::load_kv_value(block, f, KvPart::Key, t % bs, kv_head, d, sc.key);
          }
        }
        weights.push_back(static_cast<float>(dot * scale));
        top = std::max<double>(top, weights.back());
      }
      double total = 0;
      for (float& w : weights) total += (w = static_cast<float>(std::exp(w - top)));
      for (std::uint32_t d = 0; d < out_width; ++d) {
        double acc = 0;
        for (std::uint32_t t = first; t < n; ++t) {
          const std::byte* block = block_of(t);
          const float v = f.content == PageContent::MlaLatent
                              ? kernels::load_mla_latent(block, f, t % bs, d, sc.key)
                              : kernels::load_kv_value(block, f, KvPart::Value, t % bs, kv_head, d, sc.value);
          acc += weights[t - first] * v;
        }
        const float expected = static_cast<float>(acc / total);
        const float actual = got[(s * q_heads + h) * out_width + d];
        if (!(std::fabs(actual - expected) <= 1e-3f * (1.0f + std::fabs(expected)))) bad = true;
      }
    }
    ++outcome.checked;
    if (bad) outcome.mismatched.push_back(picked[s]);
  }
}

}  // namespace kvtier::replay
