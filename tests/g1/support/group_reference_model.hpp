#pragma once
// A reference model of the spec's KV cache group rules
// (docs/spec/model-geometry.md sections 2-4), written from the text and
// nothing else, slow and plain: a free list, an LRU list, a hash index of
// (hash, group) -> copies, and every hit found by trying each length from the
// longest down against each kind's definition. The differential test runs it
// beside the GroupCoordinator.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kvtier/core/model_geometry.hpp"
#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1::test {

class GroupReferenceModel {
 public:
  GroupReferenceModel(const ModelGeometry& geometry, std::size_t capacity);

  /// The common hit and the first group's own (full attention first).
  std::pair<std::size_t, std::size_t> hit(std::span<const SequenceHash> hashes, std::size_t prompt_tokens) const;
  bool allocate(std::uint64_t owner, std::span<const SequenceHash> hashes, std::size_t tokens, std::size_t reuse);
  void finalize(std::uint64_t owner, std::span<const SequenceHash> hashes, std::size_t computed);
  void free(std::uint64_t owner);
  void begin_step() { ++step_; }

  /// Which positions of the owner's table in `group` hold the null page.
  std::vector<bool> nulls(std::uint64_t owner, std::size_t group) const;
  std::size_t active(std::size_t group) const;
  std::size_t inactive(std::size_t group) const;

 private:
  static constexpr int kNull = -1;
  struct Page {
    int refs = 0;
    bool keyed = false;
    std::pair<std::uint64_t, std::size_t> key;
    std::uint64_t step = 0;
    std::size_t group = 0;
  };
  struct Owner {
    std::vector<std::vector<int>> tables;
    std::vector<std::size_t> considered;
    std::size_t computed = 0;
  };

  std::size_t bs(std::size_t g) const { return groups_[g].spec.block_size; }
  std::size_t skipped_tokens(std::size_t g, std::size_t computed) const;
  std::optional<int> cached(std::span<const SequenceHash> hashes, std::size_t g, std::size_t block) const;
  bool valid(std::span<const SequenceHash> hashes, std::size_t g, std::size_t end) const;
  std::size_t first_real(std::size_t g, std::size_t end) const;
  bool caches(std::size_t g, std::size_t block, std::size_t computed) const;
  void release(int page);
  void evict_head();

  std::vector<ResolvedGroup> groups_;
  std::size_t unit_;
  std::size_t scheduler_;
  bool hybrid_;
  std::vector<Page> pages_;
  std::deque<int> free_;
  std::list<int> lru_;
  std::map<std::pair<std::uint64_t, std::size_t>, std::deque<int>> index_;
  std::map<std::uint64_t, Owner> owners_;
  std::uint64_t step_ = 0;
};

}  // namespace kvtier::g1::test
