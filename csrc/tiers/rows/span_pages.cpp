#include "kvtier/tiers/rows/span_pages.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "kvtier/core/checked_arithmetic.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"

namespace kvtier::tiers::rows {

SpanPageTier::SpanPageTier(const SpanPagesConfig& config, const std::function<RowStore(const RowRegion&)>& open)
    : span_bytes_(config.span_bytes),
      memory_(config.memory),
      staging_rows_(config.staging_pages),
      remote_(config.remote) {
  if (span_bytes_.empty()) throw ConfigError("a page of spans needs at least one span");
  for (const std::size_t bytes : span_bytes_) {
    if (bytes == 0) throw ConfigError("a page's span of 0 bytes");
    const std::optional<std::size_t> sum = checked_add(page_bytes_, bytes);
    if (!sum || *sum > (std::size_t{1} << 40)) throw ConfigError("a page of more than 1 TiB");
    page_bytes_ = *sum;
  }
  if (memory_.empty()) throw ConfigError("a page of spans needs the engine's memory");
  for (const MemorySpan& m : memory_) {
    if (m.data == nullptr || m.bytes == 0) throw ConfigError("an engine buffer of no bytes");
  }
  if (staging_rows_ == 0) throw ConfigError("a page tier needs at least one staging page");
  row_bytes_ = (page_bytes_ + kRecordAlignment - 1) / kRecordAlignment * kRecordAlignment;
  const std::optional<std::size_t> staging_bytes = checked_mul(row_bytes_, staging_rows_);
  if (!staging_bytes) throw ConfigError("staging pages past the address space");
  staging_ = allocate_aligned(kRecordAlignment, *staging_bytes, "the page tier's staging rows");
  const RowRegion region{.base = staging_.get(), .count = staging_rows_, .row_bytes = row_bytes_};
  service_ = std::make_unique<RowService>(open(region), region, false);
  for (std::size_t r = staging_rows_; r-- > 0;) free_rows_.push_back(static_cast<std::int64_t>(r));
}

SpanPageTier::~SpanPageTier() {
  try {
    shutdown();
  } catch (...) {  // a destructor never throws
  }
}

void SpanPageTier::shutdown() { service_->shutdown(); }

void SpanPageTier::check(const std::vector<std::vector<std::byte>>& keys, const std::vector<MemorySpan>& spans) const {
  if (spans.size() != keys.size() * span_bytes_.size()) {
    throw ContractError(std::to_string(keys.size()) + " pages of " + std::to_string(span_bytes_.size()) +
                        " spans need " + std::to_string(keys.size() * span_bytes_.size()) + " spans, not " +
                        std::to_string(spans.size()));
  }
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const MemorySpan& s = spans[i];
    const std::size_t wanted = span_bytes_[i % span_bytes_.size()];
    if (s.bytes != wanted) {
      throw ContractError("span " + std::to_string(i) + " has " + std::to_string(s.bytes) + " bytes, the layout " +
                          std::to_string(wanted));
    }
    const auto inside = [&](const MemorySpan& m) {
      return s.data >= m.data && s.bytes <= m.bytes &&
             s.data - m.data <= static_cast<std::ptrdiff_t>(m.bytes - s.bytes);
    };
    if (s.data == nullptr || std::none_of(memory_.begin(), memory_.end(), inside)) {
      throw ContractError("span " + std::to_string(i) + " is outside the engine's registered memory");
    }
  }
  for (const std::vector<std::byte>& key : keys) {
    if (key.empty() || key.size() > kMaxEngineKeyBytes) {
      throw ContractError("a key of " + std::to_string(key.size()) + " bytes (1 to " +
                          std::to_string(kMaxEngineKeyBytes) + ")");
    }
  }
}

std::vector<bool> SpanPageTier::present(const std::vector<std::vector<std::byte>>& keys) {
  return remote_ ? service_->lookup_many(keys) : service_->held(keys);
}

std::vector<std::int64_t> SpanPageTier::take_rows(std::size_t wanted) {
  std::unique_lock lock(mutex_);
  freed_.wait(lock, [&] { return !free_rows_.empty(); });
  const std::size_t n = std::min(wanted, free_rows_.size());
  std::vector<std::int64_t> rows(free_rows_.end() - static_cast<std::ptrdiff_t>(n), free_rows_.end());
  free_rows_.resize(free_rows_.size() - n);
  return rows;
}

void SpanPageTier::give_back(const std::vector<std::int64_t>& rows) {
  {
    std::lock_guard lock(mutex_);
    free_rows_.insert(free_rows_.end(), rows.begin(), rows.end());
  }
  freed_.notify_all();
}

RowJobResult SpanPageTier::run(RowJob job) {
  {
    std::lock_guard lock(mutex_);
    job.id = next_job_++;
  }
  const std::uint64_t id = job.id;
  const std::vector<std::int64_t> rows = job.rows;
  try {
    service_->submit(std::move(job));
  } catch (...) {
    give_back(rows);
    throw;
  }
  return service_->wait(id);
}

std::vector<bool> SpanPageTier::store(const std::vector<std::vector<std::byte>>& keys,
                                      const std::vector<MemorySpan>& spans) {
  check(keys, spans);
  std::vector<bool> held(keys.size(), false);
  const std::size_t per_page = span_bytes_.size();
  for (std::size_t done = 0; done < keys.size();) {
    const std::vector<std::int64_t> rows = take_rows(keys.size() - done);
    RowJob job{.kind = RowJobKind::Store};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::byte* out = row(rows[i]);
      for (std::size_t s = 0; s < per_page; ++s) {
        const MemorySpan& span = spans[(done + i) * per_page + s];
        std::memcpy(out, span.data, span.bytes);
        out += span.bytes;
      }
      job.keys.push_back(keys[done + i]);
    }
    job.rows = rows;
    std::vector<std::vector<std::byte>> wave = job.keys;
    const RowJobResult result = run(std::move(job));
    give_back(rows);
    // A store reports success for the job as a whole: on failure, each page is what the tier holds now.
    const std::vector<bool> now = result.success ? std::vector<bool>(wave.size(), true) : present(wave);
    for (std::size_t i = 0; i < wave.size(); ++i) held[done + i] = now[i];
    done += wave.size();
  }
  return held;
}

std::vector<bool> SpanPageTier::load(const std::vector<std::vector<std::byte>>& keys,
                                     const std::vector<MemorySpan>& spans) {
  check(keys, spans);
  std::vector<bool> loaded(keys.size(), false);
  const std::size_t per_page = span_bytes_.size();
  for (std::size_t done = 0; done < keys.size();) {
    const std::vector<std::int64_t> rows = take_rows(keys.size() - done);
    RowJob job{.kind = RowJobKind::Load};
    job.keys.assign(keys.begin() + static_cast<std::ptrdiff_t>(done),
                    keys.begin() + static_cast<std::ptrdiff_t>(done + rows.size()));
    job.rows = rows;
    const RowJobResult result = run(std::move(job));
    for (const std::uint32_t at : result.loaded) {
      const std::byte* in = row(rows[at]);
      for (std::size_t s = 0; s < per_page; ++s) {
        const MemorySpan& span = spans[(done + at) * per_page + s];
        std::memcpy(span.data, in, span.bytes);
        in += span.bytes;
      }
      loaded[done + at] = true;
    }
    give_back(rows);
    done += rows.size();
  }
  return loaded;
}

}  // namespace kvtier::tiers::rows
