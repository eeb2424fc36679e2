// Python values <-> kvtier block identities: an int is a full block's
// sequence hash, a uuid.UUID a partial block; PLHs are ints, raw (high, low)
// pairs or (hash, parent, position) triples.
#include <nanobind/nanobind.h>

#include "kvtier/core/errors.hpp"
#include "py_manager.hpp"

namespace nb = nanobind;

namespace kvtier::python {
namespace {

nb::handle uuid_class() {
  // Leaked on purpose: a static nb::object would be released after the interpreter is gone.
  static nb::handle cls = nb::object(nb::module_::import_("uuid").attr("UUID")).release();
  return cls;
}

}  // namespace

UniqueBlock block_from_python(nb::handle value) {
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    return UniqueBlock::full(SequenceHash(nb::cast<std::uint64_t>(value)));
  }
  if (nb::isinstance(value, uuid_class())) {
    const nb::object number = value.attr("int");
    const nb::object mask = nb::int_(~std::uint64_t{0});
    const auto high = nb::cast<std::uint64_t>(number.attr("__rshift__")(64));
    const auto low = nb::cast<std::uint64_t>(number.attr("__and__")(mask));
    return UniqueBlock::partial(Uuid(high, low));
  }
  throw nb::type_error("a block is an int (a full block's sequence hash) or a uuid.UUID (a partial block)");
}

nb::object block_to_python(const UniqueBlock& block) {
  if (block.is_full()) return nb::int_(block.hash().value());
  const nb::object high = nb::int_(block.uuid().high());
  const nb::object number = high.attr("__lshift__")(64).attr("__or__")(nb::int_(block.uuid().low()));
  return uuid_class()(nb::arg("int") = number);
}

std::vector<UniqueBlock> blocks_from_python(nb::handle values) {
  std::vector<UniqueBlock> out;
  for (nb::handle value : values) out.push_back(block_from_python(value));
  return out;
}

nb::list blocks_to_python(std::span<const UniqueBlock> blocks) {
  nb::list out;
  for (const UniqueBlock& block : blocks) out.append(block_to_python(block));
  return out;
}

PositionalLineageHash plh_from_python(nb::handle value) {
  if (nb::isinstance<nb::int_>(value)) return PositionalLineageHash(SequenceHash(nb::cast<std::uint64_t>(value)), std::nullopt, 0);
  if (nb::isinstance<nb::tuple>(value)) {
    const auto items = nb::borrow<nb::tuple>(value);
    if (items.size() == 2) {
      return PositionalLineageHash::from_raw(nb::cast<std::uint64_t>(items[0]), nb::cast<std::uint64_t>(items[1]));
    }
    if (items.size() == 3) {
      const std::optional<SequenceHash> parent =
          items[1].is_none() ? std::nullopt : std::optional<SequenceHash>(SequenceHash(nb::cast<std::uint64_t>(items[1])));
      return PositionalLineageHash(SequenceHash(nb::cast<std::uint64_t>(items[0])), parent, nb::cast<std::uint64_t>(items[2]));
    }
  }
  throw nb::type_error("a PLH is an int hash, a (high, low) pair as Request.plhs gives, or (hash, parent, position)");
}

std::vector<PositionalLineageHash> plhs_from_python(nb::handle values) {
  std::vector<PositionalLineageHash> out;
  for (nb::handle value : values) out.push_back(plh_from_python(value));
  return out;
}

}  // namespace kvtier::python
