#pragma once
#include <functional>
#include <string>
#include <variant>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/core/uuid.hpp"

namespace kvtier {

/// Dynamo's `UniqueBlock`: a full block is its sequence hash, the (single,
/// trailing) partial block of a request is a random UUID.
class UniqueBlock {
 public:
  static UniqueBlock full(SequenceHash hash) { return UniqueBlock(hash); }
  static UniqueBlock partial(Uuid uuid) { return UniqueBlock(uuid); }

  bool is_full() const noexcept { return std::holds_alternative<SequenceHash>(id_); }
  bool is_partial() const noexcept { return !is_full(); }
  /// Precondition: is_full().
  SequenceHash hash() const { return std::get<SequenceHash>(id_); }
  /// Precondition: is_partial().
  const Uuid& uuid() const { return std::get<Uuid>(id_); }
  std::string to_string() const;

  friend bool operator==(const UniqueBlock&, const UniqueBlock&) = default;

 private:
  explicit UniqueBlock(SequenceHash hash) : id_(hash) {}
  explicit UniqueBlock(Uuid uuid) : id_(uuid) {}
  std::variant<SequenceHash, Uuid> id_;
};

}  // namespace kvtier

template <>
struct std::hash<kvtier::UniqueBlock> {
  std::size_t operator()(const kvtier::UniqueBlock& b) const noexcept {
    return b.is_full() ? std::hash<kvtier::SequenceHash>{}(b.hash()) : std::hash<kvtier::Uuid>{}(b.uuid());
  }
};
