// Python values <-> kvtier block identities: an int is a full block's
// sequence hash, a uuid.UUID a partial block; PLHs are ints, raw (high, low)
// pairs or (hash, parent, position) triples.
#include <nanobind/nanobind.h>

#include <string>

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

std::uint64_t unsigned_from_python(nb::handle value, const char* what) {
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value)) {
    throw nb::type_error((std::string(what) + " must be an int, not " + nb::type_name(value.type()).c_str()).c_str());
  }
  std::uint64_t out = 0;
  if (!nb::try_cast(value, out, false)) {
    throw nb::value_error((std::string(what) + " must be in [0, 2**64), not " + nb::repr(value).c_str()).c_str());
  }
  return out;
}

UniqueBlock block_from_python(nb::handle value) {
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    return UniqueBlock::full(SequenceHash(unsigned_from_python(value, "a block hash")));
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
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    return PositionalLineageHash(SequenceHash(unsigned_from_python(value, "a PLH hash")), std::nullopt, 0);
  }
  if (nb::isinstance<nb::tuple>(value)) {
    const auto items = nb::borrow<nb::tuple>(value);
    if (items.size() == 2) {
      return PositionalLineageHash::from_raw(unsigned_from_python(items[0], "a PLH's high word"),
                                             unsigned_from_python(items[1], "a PLH's low word"));
    }
    if (items.size() == 3) {
      const std::optional<SequenceHash> parent =
          items[1].is_none()
              ? std::nullopt
              : std::optional<SequenceHash>(SequenceHash(unsigned_from_python(items[1], "a PLH's parent")));
      return PositionalLineageHash(SequenceHash(unsigned_from_python(items[0], "a PLH's hash")), parent,
                                   unsigned_from_python(items[2], "a PLH's position"));
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
