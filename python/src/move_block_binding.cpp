// The MoveBlock level of kvtier.Manager — the calls the script has: use,
// deref, promote, finalize of an owner's blocks, the decode reservation and
// the destination (disaggregated) flow. Owners are ints the caller picks
// below 2^63 (requests made by add_request use ids from 2^63 up).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "py_manager.hpp"
#include "py_results.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

UseSignal use_signal(nb::handle blocks, std::optional<std::vector<std::uint64_t>> local_hashes, nb::handle plhs,
                     std::optional<BlockTokenIds> token_ids, nb::handle parent) {
  UseSignal use;
  use.blocks = blocks_from_python(blocks);
  for (std::uint64_t local : local_hashes.value_or(std::vector<std::uint64_t>{})) use.local_hashes.emplace_back(local);
  if (plhs.is_none()) {
    for (const UniqueBlock& b : use.blocks) {
      if (b.is_full()) use.plhs.emplace_back(b.hash(), std::nullopt, 0);
    }
  } else {
    use.plhs = plhs_from_python(plhs);
  }
  use.token_ids = std::move(token_ids);
  if (!parent.is_none()) use.parent = block_from_python(parent);
  return use;
}

DecodeReservationHandle& live(PyManager& m, DecodeReservationHandle& handle) {
  m.session().check_handle(handle.manager_id, "the decode reservation");
  KVTIER_EXPECTS(handle.reservation, "the decode reservation was already released");
  return handle;
}

DestinationReservationHandle& live(PyManager& m, DestinationReservationHandle& handle) {
  m.session().check_handle(handle.manager_id, "the destination reservation");
  KVTIER_EXPECTS(handle.reservation, "the destination reservation was already activated or cancelled");
  return handle;
}

/// A MoveBlock-level owner: below 2^63, where request owners start.
g1::OwnerId caller_owner(std::uint64_t owner) {
  ManagerSession::check_caller_owner(owner);
  return g1::OwnerId(owner);
}

}  // namespace

void bind_move_block_calls(nb::class_<PyManager>& c) {
  c.def(
       "use",
       [](PyManager& m, std::uint64_t owner, nb::handle blocks, std::optional<std::vector<std::uint64_t>> local_hashes,
          nb::handle plhs, std::optional<BlockTokenIds> token_ids, nb::handle parent, std::size_t reuse) {
         const g1::OwnerId id = caller_owner(owner);
         const UseSignal use = use_signal(blocks, std::move(local_hashes), plhs, std::move(token_ids), parent);
         return m.call([&] { return Acquire::from(m.manager().process_for_request(id, use, reuse)); });
       },
       "owner"_a, "blocks"_a, "local_hashes"_a = nb::none(), "plhs"_a = nb::none(), "token_ids"_a = nb::none(),
       "parent"_a = nb::none(), "reuse"_a = 0,
       "MoveBlock Use: the owner now needs these blocks (int hashes of full blocks, a uuid.UUID for a partial one). "
       "plhs default to (hash, None, 0) per full block; token_ids hold block_size ids per full block; `reuse` is the "
       "native backend's reusable_prefix_blocks.")
      .def(
          "deref",
          [](PyManager& m, std::uint64_t owner, nb::handle blocks) {
            const g1::OwnerId id = caller_owner(owner);
            const DerefSignal deref{blocks_from_python(blocks)};
            m.call([&] { m.manager().process_for_request(id, deref); });
          },
          "owner"_a, "blocks"_a, "MoveBlock Deref: release one ownership of each block, leaf first.")
      .def(
          "promote",
          [](PyManager& m, std::uint64_t owner, nb::handle partial, std::uint64_t hash,
             std::optional<std::uint64_t> parent, std::uint64_t local, nb::handle plh,
             std::optional<std::vector<TokenId>> token_ids) {
            const g1::OwnerId id = caller_owner(owner);
            const UniqueBlock block = block_from_python(partial);
            if (block.is_full()) throw nb::type_error("promote takes the partial block's uuid.UUID");
            const PromoteSignal promote{
                .uuid = block.uuid(),
                .hash = SequenceHash(hash),
                .parent = parent ? std::optional<SequenceHash>(SequenceHash(*parent)) : std::nullopt,
                .local = LocalBlockHash(local),
                .plh =
                    plh.is_none() ? PositionalLineageHash(SequenceHash(hash), std::nullopt, 0) : plh_from_python(plh),
                .token_ids = std::move(token_ids)};
            m.call([&] { m.manager().process_for_request(id, promote); });
          },
          "owner"_a, "partial"_a, "hash"_a, "parent"_a = nb::none(), "local"_a = 0, "plh"_a = nb::none(),
          "token_ids"_a = nb::none(), "MoveBlock Promote: the owner's partial block is now full with identity `hash`.")
      .def(
          "finalize_blocks",
          [](PyManager& m, std::uint64_t owner, std::size_t before, std::size_t after) {
            const g1::OwnerId id = caller_owner(owner);
            m.call([&] { m.manager().finalize_computed_prefix(id, before, after); });
          },
          "owner"_a, "before"_a, "after"_a,
          "Native: the owner's blocks in [before/block_size, after/block_size) become visible. KVBM: no-op.")
      .def(
          "owned_blocks",
          [](PyManager& m, std::uint64_t owner) {
            return blocks_to_python(m.manager().owned_blocks(g1::OwnerId(owner)));
          },
          "owner"_a)
      .def("owners",
           [](PyManager& m) {
             std::vector<std::uint64_t> out;
             for (g1::OwnerId owner : m.manager().owners()) out.push_back(owner.value());
             return out;
           })
      .def(
          "has_owner", [](PyManager& m, std::uint64_t owner) { return m.manager().has_owner(g1::OwnerId(owner)); },
          "owner"_a)
      .def(
          "is_cached", [](PyManager& m, std::uint64_t hash) { return m.manager().is_cached(SequenceHash(hash)); },
          "hash"_a, "Whether a block with this sequence hash is registered (visible) in G1.")
      .def(
          "reserve_decode",
          [](PyManager& m, std::size_t blocks) -> std::optional<DecodeReservationHandle> {
            auto reservation = m.manager().reserve_decode_blocks(blocks);
            if (!reservation) return std::nullopt;
            return DecodeReservationHandle{m.session().id(), std::move(reservation)};
          },
          "blocks"_a, "Promises capacity for decode growth; None when G1 cannot (nothing changed).")
      .def(
          "decode_use",
          [](PyManager& m, std::uint64_t owner, DecodeReservationHandle& reservation, nb::handle blocks,
             std::optional<std::vector<std::uint64_t>> local_hashes, nb::handle plhs,
             std::optional<BlockTokenIds> token_ids, nb::handle parent) {
            const g1::OwnerId id = caller_owner(owner);
            g1::DecodeReservation& held = *live(m, reservation).reservation;
            const UseSignal use = use_signal(blocks, std::move(local_hashes), plhs, std::move(token_ids), parent);
            return m.call([&] { return Acquire::from(m.manager().process_decode_signal_for_request(id, use, held)); });
          },
          "owner"_a, "reservation"_a, "blocks"_a, "local_hashes"_a = nb::none(), "plhs"_a = nb::none(),
          "token_ids"_a = nb::none(), "parent"_a = nb::none(), "A Use whose fresh pages come from the reservation.")
      .def(
          "release_decode",
          [](PyManager& m, DecodeReservationHandle& reservation) {
            g1::DecodeReservation held = *live(m, reservation).reservation;
            m.call([&] {
              m.manager().release_decode_reservation(std::move(held));
              reservation.reservation.reset();
            });
          },
          "reservation"_a)
      .def(
          "reserve_destination",
          [](PyManager& m, nb::handle request, double now_ms) -> std::optional<DestinationReservationHandle> {
            if (!nb::isinstance<RequestState>(request))
              throw nb::type_error("reserve_destination takes a kvtier.Request");
            RequestState& r = nb::cast<RequestState&>(request);
            m.session().check_request(r);
            auto reservation =
                m.call_or_give_back([&] { return m.manager().reserve_destination_at(r.owner, r.sequence, now_ms); },
                                    [&](auto& held) {
                                      if (held) m.manager().cancel_destination(std::move(*held));
                                    });
            if (!reservation) return std::nullopt;
            return DestinationReservationHandle{m.session().id(), std::move(reservation), nb::borrow(request)};
          },
          "request"_a, "now_ms"_a = 0.0,
          "Disaggregated serving: reserves the request's destination blocks (None when G1 cannot); activating it "
          "allocates the request's prompt.")
      .def(
          "activate_destination",
          [](PyManager& m, DestinationReservationHandle& reservation) {
            g1::DestinationReservation held = *live(m, reservation).reservation;
            m.call([&] {
              m.manager().activate_destination(std::move(held));
              reservation.reservation.reset();
              // The prompt's K/V arrives from the prefill worker: allocated and computed.
              RequestState& r = nb::cast<RequestState&>(reservation.request);
              r.sequence.commit_allocation(r.sequence.num_input_tokens());
              r.computed_tokens = r.sequence.num_input_tokens();
            });
          },
          "reservation"_a)
      .def(
          "cancel_destination",
          [](PyManager& m, DestinationReservationHandle& reservation) {
            g1::DestinationReservation held = *live(m, reservation).reservation;
            m.call([&] {
              m.manager().cancel_destination(std::move(held));
              reservation.reservation.reset();
            });
          },
          "reservation"_a);
}

}  // namespace kvtier::python
