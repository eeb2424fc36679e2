#pragma once
// Pages an engine keeps as several spans of its own memory (SGLang's HiCache
// host pool: a page's K and V, or K and V of each layer), stored in a tier of
// rows (row_service.hpp, G3 or G4) as one record each, the spans back to back.
// The record is the row service's: checksummed, the engine's whole key in it,
// under the engine's namespace. Each page passes through a row of the tier's
// own aligned staging memory (O_DIRECT reads and writes whole 4 KiB units,
// which a span of a few hundred bytes is not): one copy each way, the I/O on
// the service's thread. Calls are synchronous and safe from any thread: a
// batch takes staging rows as they are free, so calls from several threads
// interleave; none holds rows while it waits for more.
// A span that is not inside the memory the engine registered is refused
// before anything is read or written (ContractError), and a page is reported
// loaded only once its record verified; a page that did not is left as the
// staging copy found it: its spans are not written.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kvtier/core/aligned_bytes.hpp"
#include "kvtier/tiers/rows/row_service.hpp"

namespace kvtier::tiers::rows {

/// Bytes of the engine's memory: a span of a page, or a buffer it registered.
struct MemorySpan {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
};

struct SpanPagesConfig {
  /// The bytes of each span of a page, in order (2 for page-first K, V; 2 x layers for layer-first).
  std::vector<std::size_t> span_bytes{};
  /// The engine's buffers: every span must lie inside one of them.
  std::vector<MemorySpan> memory{};
  /// Pages in flight at once (the staging rows; at least 1).
  std::size_t staging_pages = 32;
  /// A remote tier (G4): presence is asked of the store, not taken from what this process stored.
  bool remote = false;
};

class SpanPageTier {
 public:
  /// Opens the store over the staging rows (`open` gets them; their row size is
  /// the page's bytes rounded up to kRecordAlignment). ConfigError: no spans,
  /// a span of 0 bytes, no memory, no staging row.
  SpanPageTier(const SpanPagesConfig& config, const std::function<RowStore(const RowRegion&)>& open);
  SpanPageTier(const SpanPageTier&) = delete;
  SpanPageTier& operator=(const SpanPageTier&) = delete;
  ~SpanPageTier();

  /// Of `keys`, those the tier holds (G3: known in memory; G4: one round trip within its deadline).
  std::vector<bool> present(const std::vector<std::vector<std::byte>>& keys);
  /// Writes page i (spans i * spans_per_page() ...) under keys[i]; per page,
  /// whether the tier holds it now (written now or before).
  std::vector<bool> store(const std::vector<std::vector<std::byte>>& keys, const std::vector<MemorySpan>& spans);
  /// Reads keys[i] into page i's spans; per page, whether they hold its verified bytes.
  std::vector<bool> load(const std::vector<std::vector<std::byte>>& keys, const std::vector<MemorySpan>& spans);
  /// Uses in order (the last the most recent), or pages no longer of use (evicted first).
  void note_uses(const std::vector<std::vector<std::byte>>& keys, bool demote) { service_->note_uses(keys, demote); }

  std::size_t spans_per_page() const noexcept { return span_bytes_.size(); }
  std::size_t page_bytes() const noexcept { return page_bytes_; }
  RowService& service() noexcept { return *service_; }
  const RowService& service() const noexcept { return *service_; }
  /// Ends the service (idempotent); later calls fail with ContractError.
  void shutdown();

 private:
  /// ContractError unless `spans` are keys.size() pages of this layout inside the engine's memory.
  void check(const std::vector<std::vector<std::byte>>& keys, const std::vector<MemorySpan>& spans) const;
  /// Up to `wanted` free staging rows (at least one: waits for it).
  std::vector<std::int64_t> take_rows(std::size_t wanted);
  void give_back(const std::vector<std::int64_t>& rows);
  /// Submits `job` under a new id and waits for its result; its rows are given back if it cannot be submitted.
  RowJobResult run(RowJob job);
  std::byte* row(std::int64_t r) const noexcept { return staging_.get() + static_cast<std::size_t>(r) * row_bytes_; }

  std::vector<std::size_t> span_bytes_;
  std::vector<MemorySpan> memory_;
  std::size_t page_bytes_ = 0;
  std::size_t row_bytes_ = 0;
  std::size_t staging_rows_ = 0;
  bool remote_ = false;
  AlignedBytes staging_;
  std::unique_ptr<RowService> service_;

  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::int64_t> free_rows_;
  std::uint64_t next_job_ = 1;
};

}  // namespace kvtier::tiers::rows
