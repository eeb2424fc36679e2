// The offload (G2) calls of kvtier.Manager (docs/offload.md): collecting
// finished copies, the tier's state, pinning a G1 prefix and swapping a
// host-resident prefix back in.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "py_manager.hpp"
#include "py_results.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

/// ContractError unless `handle` is this manager's and not spent yet.
void check_pins(PyManager& m, const PrefixPinsHandle& handle) {
  m.session().check_handle(handle.manager_id, "the prefix pins");
  KVTIER_EXPECTS(handle.pins, "the prefix pins were already released or used");
}

std::optional<g1::G1PrefixPins> take_pins(PyManager& m, std::optional<PrefixPinsHandle*> handle) {
  if (!handle || *handle == nullptr) return std::nullopt;
  check_pins(m, **handle);
  return std::exchange((*handle)->pins, std::nullopt);
}

/// The G2 keys a call means. A kvtier.Request: its full blocks' keys on either
/// backend. Otherwise a list: on KVBM of PLHs; on native, whose tier keys are
/// sequence hashes, ints are block hashes and tuples raw (high, low) keys.
std::vector<PositionalLineageHash> tier_keys(PyManager& m, nb::handle keys) {
  const bool kvbm = m.manager().backend() == g1::G1Backend::Kvbm;
  std::vector<PositionalLineageHash> out;
  if (nb::isinstance<RequestState>(keys)) {
    const RequestState& r = nb::cast<RequestState&>(keys);
    m.session().check_request(r);
    return m.manager().tier_keys(r.sequence, r.sequence.full_block_count());
  }
  if (kvbm) return plhs_from_python(keys);
  for (nb::handle key : keys) {
    const bool hash = nb::isinstance<nb::int_>(key) && !nb::isinstance<nb::bool_>(key);
    out.push_back(hash ? g1::native_tier_key(SequenceHash(unsigned_from_python(key, "a block hash")))
                       : plh_from_python(key));
  }
  return out;
}

}  // namespace

void bind_offload_calls(nb::class_<PyManager>& c) {
  c.def(
       "collect_offloads",
       [](PyManager& m, bool wait) {
         const g1::TierProgress progress = m.call([&] { return m.manager().collect_offloads(wait); });
         nb::dict out;
         out["completed"] = progress.completed;
         out["failed"] = progress.failed;
         std::vector<std::uint32_t> released;
         for (PageId page : progress.released) released.push_back(page.value());
         out["released_pages"] = released;
         return out;
       },
       "wait"_a = false,
       "Applies the copies that ended (with wait=True, every one in flight): G2 blocks land (HostPinned Stored "
       "events), G1 pages their copies read are freed.")
      .def(
          "is_host_cached",
          [](PyManager& m, std::uint64_t hash) { return m.manager().is_host_cached(SequenceHash(hash)); }, "hash"_a,
          "Whether the block is resident in the G2 host tier.")
      .def("earliest_offload_deadline", [](PyManager& m) { return m.manager().earliest_offload_deadline(); })
      .def(
          "swap_in_prefix",
          [](PyManager& m, RequestState& r, std::optional<std::size_t> prompt_tokens) {
            m.session().check_request(r);
            const driver::SwapInOutcome done = m.call([&] {
              const driver::SwapInOutcome outcome =
                  m.session().driver().swap_in_prefix(r.sequence, prompt_tokens.value_or(r.sequence.len()));
              m.session().count_prefix_swap_in(outcome.registered, outcome.from_lower, outcome.from_external);
              return outcome;
            });
            nb::dict out;
            out["registered"] = done.registered;
            out["from_g2"] = done.registered - done.from_lower;
            out["from_disk"] = done.from_lower - done.from_external;
            out["from_shared"] = done.from_external;
            return out;
          },
          "request"_a, "prompt_tokens"_a = nb::none(),
          "Before the request's next allocate: brings back what G2 (and G3/G4 through it) holds of its first "
          "`prompt_tokens` tokens (default: all) right after its G1 prefix, as `kvtier replay` does — pinned, "
          "swapped in and registered, so the allocation hits it (with groups every group's pages of the fixed point "
          "over G1 and the tiers, in rounds while G2 cannot land it at once). Answers the pages registered and where "
          "they came from; nothing without a G2 tier.")
      .def(
          "group_swap_in_plan",
          [](PyManager& m, RequestState& r, std::optional<std::size_t> prompt_tokens) {
            m.session().check_request(r);
            const g1::SwapInPlan plan = m.call(
                [&] { return m.manager().group_swap_in_plan(r.sequence, prompt_tokens.value_or(r.sequence.len())); });
            const auto pairs = [](const std::vector<PositionalLineageHash>& keys) {
              nb::list out;
              for (const PositionalLineageHash& key : keys) out.append(nb::make_tuple(key.high(), key.low()));
              return out;
            };
            nb::dict out;
            out["tokens"] = plan.tokens;
            out["pin"] = pairs(plan.pin);
            out["fetch"] = pairs(plan.fetch);
            return out;
          },
          "request"_a, "prompt_tokens"_a = nb::none(),
          "A manager with KV cache groups: what a swap-in before the request's first allocate brings back — "
          "{'tokens': the groups' hit over G1 and the tiers, 'pin': G1 blocks to pin_prefix, 'fetch': tier blocks "
          "to swap_in}, as (group, hash) keys (docs/offload.md, \"KV cache groups\").")
      .def(
          "pin_prefix",
          [](PyManager& m, nb::handle plhs) -> std::optional<PrefixPinsHandle> {
            const auto list = tier_keys(m, plhs);
            auto pins = m.call_or_give_back([&] { return m.manager().try_pin_g1_prefix(list); },
                                            [&](auto& held) {
                                              if (held) m.manager().release_g1_prefix_pins(std::move(*held));
                                            });
            if (!pins) return std::nullopt;
            return PrefixPinsHandle{m.session().id(), std::move(pins)};
          },
          "plhs"_a,
          "Pins every listed block registered in G1, or none (None). `plhs`: a Request (its full blocks), or its "
          "keys: PLHs on KVBM, block hashes (ints) on native.")
      .def(
          "release_prefix_pins",
          [](PyManager& m, PrefixPinsHandle& pins) {
            auto held = take_pins(m, &pins);
            m.call([&] { m.manager().release_g1_prefix_pins(std::move(*held)); });
          },
          "pins"_a)
      .def(
          "swap_in",
          [](PyManager& m, nb::handle plhs, std::optional<PrefixPinsHandle*> pins, double now_ms) {
            const auto list = tier_keys(m, plhs);
            // Checked before the call consumes them: a spent or foreign handle changes nothing.
            if (pins && *pins != nullptr) check_pins(m, **pins);
            const g1::SwapInStart start =
                m.call_or_give_back([&] { return m.manager().try_batch_swap_in(list, take_pins(m, pins), now_ms); },
                                    [&](const g1::SwapInStart& started) {
                                      if (started.status == g1::SwapInStatus::Scheduled)
                                        m.manager().cancel_swap_in(started.swap_in_id);
                                    });
            nb::dict out;
            out["status"] = g1::swap_in_status_name(start.status);
            if (start.status == g1::SwapInStatus::Scheduled) {
              m.session().note_swap_in(start.swap_in_id, start.from_lower, start.from_external);
              out["swap_in_id"] = start.swap_in_id;
              out["count"] = start.count;
              out["from_disk"] = start.from_lower - start.from_external;
              out["from_shared"] = start.from_external;
            } else if (start.status == g1::SwapInStatus::BlockedOnG1Offload) {
              out["offload_id"] = start.offload_id;
            }
            return out;
          },
          "plhs"_a, "pins"_a = nb::none(), "now_ms"_a = 0.0,
          "Starts copying the G2-resident prefix of `plhs` (a Request, or keys as pin_prefix takes) into fresh G1 "
          "pages (the pins, if given, are consumed).")
      .def(
          "register_swap_in",
          [](PyManager& m, std::uint64_t swap_in_id) {
            const g1::SwapInRegistration r = m.call([&] {
              const g1::SwapInRegistration done = m.manager().register_completed_swap_in(swap_in_id);
              m.session().count_swap_in(swap_in_id, done.registered);
              return done;
            });
            nb::dict out;
            out["failed"] = r.failed;
            out["registered"] = r.registered;
            return out;
          },
          "swap_in_id"_a, "Waits for the swap-in's copy and registers its blocks as inactive G1 blocks.")
      .def(
          "cancel_swap_in",
          [](PyManager& m, std::uint64_t swap_in_id) {
            return m.call([&] { return m.manager().cancel_swap_in(swap_in_id); });
          },
          "swap_in_id"_a);
}

}  // namespace kvtier::python
