// kvtier.Manager: construction, request-level calls through the library's
// RequestDriver, metrics and events (its pages and views: page_binding.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "dlpack_views.hpp"
#include "event_conversion.hpp"
#include "group_views.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/model/group_specs.hpp"
#include "kvtier/model/model_config.hpp"
#include "kvtier/model/model_presets.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "py_manager.hpp"
#include "py_results.hpp"

#if KVTIER_WITH_ZMQ
#include "kvtier/events/zmq_event_publisher.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {

ManagerSession& PyManager::session() {
  KVTIER_EXPECTS(session_, "the manager is closed");
  return *session_;
}

void PyManager::close() {
  std::vector<nb::callable> callbacks = std::move(callbacks_);  // dropped after the session: they may hold views
  callbacks_.clear();
  if (!session_) return;
  // Copies in flight end before the engine and the pages they touch go.
  if (session_->engine() != nullptr) session_->manager().collect_offloads(true);
  session_.reset();
}

int PyManager::traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;  // called before __init__ finished
  for (const nb::callable& callback : nb::inst_ptr<PyManager>(self)->callbacks_) Py_VISIT(callback.ptr());
  return 0;
}

int PyManager::clear(PyObject* self) {
  PyManager* m = nb::inst_ptr<PyManager>(self);
  const std::vector<nb::callable> dropped = std::move(m->callbacks_);  // released after the member is empty
  m->callbacks_.clear();
  return 0;
}

void PyManager::add_callback(nb::callable callback) {
  ManagerSession& s = session();
  callbacks_.push_back(std::move(callback));
  s.events().keep_fresh(true);
}

bool PyManager::remove_callback(const nb::handle& callback) {
  ManagerSession& s = session();
  const auto it =
      std::find_if(callbacks_.begin(), callbacks_.end(), [&](const nb::callable& c) { return c.is(callback); });
  if (it == callbacks_.end()) return false;
  callbacks_.erase(it);
  if (callbacks_.empty()) s.events().keep_fresh(false);
  return true;
}

void PyManager::deliver() {
  if (callbacks_.empty() || !session_) return;
  const std::vector<KvEvent> fresh = session_->events().take_fresh();
  std::optional<nb::python_error> first;
  const std::vector<nb::callable> callbacks = callbacks_;  // a callback may remove itself
  for (const KvEvent& event : fresh) {
    const nb::dict value = event_to_python(event);
    for (const nb::callable& callback : callbacks) {
      try {
        callback(value);
      } catch (nb::python_error& error) {
        if (!first) first.emplace(std::move(error));
      }
    }
  }
  if (first) throw std::move(*first);
}

nb::list PyManager::take_events() {
  nb::list out;
  for (const KvEvent& event : session().events().take()) out.append(event_to_python(event));
  return out;
}

namespace {

RequestState& checked(PyManager& m, RequestState& request) {
  m.session().check_request(request);
  return request;
}

nb::dict metrics(PyManager& m) {
  const g1::G1Manager& manager = m.manager();
  const g1::G1Metrics metrics = manager.metrics();
  const g1::OffloadStats offload = manager.offload_stats();
  nb::dict out;
  out["active"] = metrics.active_blocks;
  out["active_refs"] = metrics.active_block_refs;
  out["inactive"] = metrics.inactive_blocks;
  out["active_perc"] = metrics.active_perc();
  out["capacity"] = manager.max_capacity();
  out["block_size"] = manager.block_size();
  out["dp_rank"] = manager.dp_rank();
  out["host_used"] = offload.tier.used;
  out["host_capacity"] = offload.tier.capacity;
  out["offloads_in_flight"] = offload.tier.in_flight;
  out["quarantined"] = offload.quarantined;
  out["swap_verify_failures"] = offload.tier.verify_failures;
  out["failed_transfers"] = offload.tier.failed_transfers;
  out["g2_admission_declined"] = offload.tier.admission_declined;
  out["metadata_bytes"] = manager.metadata_bytes();
  out["events_dropped"] = m.session().events().dropped();
  if (manager.geometry() != nullptr) {
    nb::list groups;
    for (const g1::GroupUsage& group : manager.group_usage()) {
      nb::dict usage;
      usage["active"] = group.active;
      usage["inactive"] = group.inactive;
      groups.append(usage);
    }
    out["groups"] = groups;
  }
  const offload::OffloadEngine* engine = m.session().engine();
  if (engine != nullptr) {
    out["g3_admission_declined"] = engine->lower_usage(StorageTier::Disk).declined;
    out["g4_admission_declined"] = engine->lower_usage(StorageTier::External).declined;
  }
  for (const auto& [name, value] : m.session().stack().lower_tier_counters()) out[name] = value;
  if (const tiers::LowerTier* disk = m.session().stack().lower_tier(StorageTier::Disk)) {
    out["disk_direct_io"] = session::disk_tier_facts(*disk).direct_io;
  }
  return out;
}

std::string prometheus_text(PyManager& m) {
#if KVTIER_WITH_PROMETHEUS
  ManagerSession& session = m.session();
  metrics::PrometheusMetrics& prometheus = session.prometheus();
  prometheus.update(session.kv_metrics());
  return prometheus.text();
#else
  (void)m;
  throw ConfigError("this build of kvtier has no Prometheus metrics (prometheus-cpp-dev)");
#endif
}

void bind_request(nb::module_& module) {
  nb::class_<RequestState>(module, "Request",
                           "A request the scheduler drives (Manager.add_request): its tokens, blocks and owner id.")
      .def_prop_ro("owner", [](const RequestState& r) { return r.owner.value(); })
      .def_prop_ro("tokens",
                   [](const RequestState& r) {
                     return std::vector<TokenId>(r.sequence.tokens().begin(), r.sequence.tokens().end());
                   })
      .def("__len__", [](const RequestState& r) { return r.sequence.len(); })
      .def_prop_ro("num_prompt_tokens", [](const RequestState& r) { return r.sequence.num_input_tokens(); })
      .def_prop_ro("generated_tokens", [](const RequestState& r) { return r.sequence.generated_tokens(); })
      .def_prop_ro("max_output_tokens", [](const RequestState& r) { return r.sequence.max_output_tokens(); })
      .def_prop_ro("allocated_tokens", [](const RequestState& r) { return r.sequence.num_allocated_tokens(); })
      .def_prop_ro("computed_tokens", [](const RequestState& r) { return r.computed_tokens; })
      .def_prop_ro("is_complete", [](const RequestState& r) { return r.sequence.is_complete(); })
      .def_prop_ro("finished", [](const RequestState& r) { return r.finished; })
      .def_prop_ro(
          "blocks", [](const RequestState& r) { return blocks_to_python(r.sequence.blocks()); },
          "Its blocks: an int sequence hash per full block, a uuid.UUID for the partial one.")
      .def_prop_ro(
          "plhs",
          [](const RequestState& r) {
            nb::list out;
            for (std::size_t i = 0; i < r.sequence.full_block_count(); ++i) {
              const PositionalLineageHash plh = r.sequence.plh(i);
              out.append(nb::make_tuple(plh.high(), plh.low()));
            }
            return out;
          },
          "The positional lineage hash of each full block, as (high, low) words.")
      .def("__repr__", [](const RequestState& r) {
        return "Request(owner=" + std::to_string(r.owner.value()) + ", tokens=" + std::to_string(r.sequence.len()) +
               ", allocated=" + std::to_string(r.sequence.num_allocated_tokens()) + ")";
      });
}

void bind_request_calls(nb::class_<PyManager>& c) {
  c.def(
       "add_request",
       [](PyManager& m, std::vector<TokenId> prompt, std::size_t max_output_tokens, bool emit_token_ids,
          std::optional<std::vector<TokenId>> planned_output) {
         return m.session().new_request(std::move(prompt), max_output_tokens, emit_token_ids,
                                        planned_output.value_or(std::vector<TokenId>{}));
       },
       "prompt"_a, "max_output_tokens"_a = 0, "emit_token_ids"_a = false, "planned_output"_a = nb::none(),
       "A request over the prompt's token ids (nothing allocated yet). With emit_token_ids its Stored events carry "
       "the blocks' token ids; planned_output are the tokens generate() appends before random ones.")
      .def(
          "resident_prefix",
          [](PyManager& m, RequestState& r) { return m.session().driver().resident_prefix(checked(m, r).sequence); },
          "Leading full blocks of the request cached in G1 now.")
      .def(
          "begin_step", [](PyManager& m) { m.call([&] { m.manager().begin_step(); }); },
          "A scheduler step begins: Mamba states cached in earlier steps may be hit from now on (vLLM makes a "
          "state cached in a step a hit from the next one). Call it once a step, before admitting requests.")
      .def("prefill_cost",
           [](PyManager& m, RequestState& r) { return m.manager().get_prefill_cost(checked(m, r).sequence); })
      .def(
          "allocate",
          [](PyManager& m, RequestState& r, std::optional<std::size_t> tokens, std::optional<std::size_t> reuse) {
            checked(m, r);
            KVTIER_EXPECTS(!r.finished, "the request has finished");
            return m.call([&] {
              ManagerSession& session = m.session();
              const bool first = !r.admitted;
              const std::size_t cached =
                  first ? session.manager().get_prefill_cost(r.sequence).cached_tokens / session.manager().block_size()
                        : 0;
              const g1::G1Acquire acquire =
                  session.driver().allocate(r.owner, r.sequence, tokens.value_or(r.sequence.len()), reuse);
              if (first && acquire.is_ready()) {
                r.admitted = true;
                // Native reuses what it is told; KVBM matches the lineage itself.
                const bool told = reuse && session.manager().backend() == g1::G1Backend::Native;
                session.count_admission(r, told ? *reuse : cached);
              }
              return Acquire::from(acquire);
            });
          },
          "request"_a, "tokens"_a = nb::none(), "reuse"_a = nb::none(),
          "Allocates pages for the first `tokens` tokens (default: all). A native request reuses its resident prefix "
          "unless `reuse` says how many blocks. Capacity exhaustion is a result, not an error; nothing changes then.")
      .def(
          "finalize",
          [](PyManager& m, RequestState& r, std::size_t computed_tokens) {
            checked(m, r);
            KVTIER_EXPECTS(computed_tokens >= r.computed_tokens && computed_tokens <= r.sequence.num_allocated_tokens(),
                           "finalize: computed tokens must stay within [" + std::to_string(r.computed_tokens) + ", " +
                               std::to_string(r.sequence.num_allocated_tokens()) + "] (computed so far, allocated)");
            m.call([&] {
              m.session().driver().finalize(r.owner, r.sequence, r.computed_tokens, computed_tokens);
              r.computed_tokens = computed_tokens;
            });
          },
          "request"_a, "computed_tokens"_a,
          "The request's first `computed_tokens` tokens now hold K/V: the native backend makes their full blocks "
          "visible to other requests (KVBM blocks are visible at allocation).")
      .def(
          "generate",
          [](PyManager& m, RequestState& r, std::optional<TokenId> token) {
            checked(m, r);
            KVTIER_EXPECTS(!r.finished, "the request has finished");
            return m.call([&] {
              const DecodeStepResult step =
                  DecodeStepResult::from(m.session().driver().decode(r.owner, r.sequence, token));
              if (step.finished) {
                r.finished = true;
                r.computed_tokens = 0;
              } else if (step.acquire.result == "ready") {
                r.computed_tokens = r.sequence.len();
              }
              return step;
            });
          },
          "request"_a, "token"_a = nb::none(),
          "Appends one output token (`token`, else the next planned one, else a random id) and applies its signals. "
          "On capacity_exhausted the token stays: allocate(request) retries its block. The last output token "
          "releases every block (finished).")
      .def(
          "finish",
          [](PyManager& m, RequestState& r) {
            checked(m, r);
            m.call([&] {
              m.session().driver().release(r.owner, r.sequence);
              r.finished = true;
              r.computed_tokens = 0;
            });
          },
          "Releases the request's blocks (leaf first); it cannot be allocated again.")
      .def(
          "preempt",
          [](PyManager& m, RequestState& r) {
            checked(m, r);
            KVTIER_EXPECTS(!r.finished, "the request has finished");
            m.call([&] {
              m.session().driver().release(r.owner, r.sequence);
              r.computed_tokens = 0;
            });
          },
          "Releases the request's blocks and keeps its tokens: allocate it again to resume (recomputing).");
}

void bind_events(nb::class_<PyManager>& c) {
  c.def("take_events", &PyManager::take_events,
        "The events not taken yet, oldest first, as dicts in the script's format "
        "({'id', 'dp_rank', 'tier', 'type': 'stored'|'removed', ...}).")
      .def(
          "events", [](PyManager& m) { return nb::iter(m.take_events()); },
          "An iterator over the events not taken yet (the queue is drained when it is made).")
      .def("add_event_callback", &PyManager::add_callback, "callback"_a,
           "Calls callback(event) for every later event, right after the call that made it.")
      .def("remove_event_callback", &PyManager::remove_callback, "callback"_a);
}

}  // namespace

/// The owner a call means: a Request's, or an int owner of the MoveBlock level.
g1::OwnerId owner_of(PyManager& m, nb::handle value) {
  if (nb::isinstance<RequestState>(value)) return checked(m, nb::cast<RequestState&>(value)).owner;
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value)) {
    throw nb::type_error("an owner is a kvtier.Request or an int owner id");
  }
  return g1::OwnerId(unsigned_from_python(value, "an owner id"));
}

g1::OwnerId existing_owner(PyManager& m, nb::handle value) {
  const g1::OwnerId owner = owner_of(m, value);
  KVTIER_EXPECTS(m.manager().has_owner(owner), "unknown owner " + std::to_string(owner.value()));
  return owner;
}

void bind_manager(nb::module_& module) {
  static const session::SessionConfig kDefaults{};
  bind_request(module);
  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&PyManager::traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(&PyManager::clear)},
                                {0, nullptr}};
  nb::class_<PyManager> c(module, "Manager", nb::type_slots(slots),
                          "A G1 manager over real pages: the native (vLLM-style) or KVBM backend, a pool of pages "
                          "in device memory (host memory on the host runtime) and an optional G2 host tier.");
  c.def(
      "__init__",
      [](PyManager* self, std::string backend, std::optional<std::string> eviction, std::uint32_t capacity,
         std::uint32_t block_size, std::uint32_t layers, std::uint32_t kv_heads, std::uint32_t head_dim,
         std::string dtype, std::string layout, std::string device, std::uint32_t host_blocks,
         std::optional<std::uint32_t> offload_batch, bool verify_swaps, std::optional<std::string> disk_path,
         std::uint32_t disk_blocks, unsigned disk_queue_depth, bool disk_reformat,
         std::optional<std::vector<std::string>> shared_tier, std::string shared_namespace, std::uint32_t shared_ttl,
         std::uint32_t shared_timeout_ms, std::optional<std::string> tier_key_file, bool prefix_caching,
         std::uint32_t dp_rank, std::uint64_t seed, std::size_t max_pending_events, std::vector<nb::handle> publishers,
         std::optional<nb::list> groups, std::optional<std::string> model_name, std::optional<std::string> model_config,
         std::optional<std::string> kv_cache_dtype, std::optional<std::string> native_eviction,
         std::optional<std::string> g2_eviction, std::string g2_admission, std::string g3_admission,
         std::string g4_admission, std::string disk_sync) {
        std::vector<std::shared_ptr<KvEventSink>> sinks;
        for (nb::handle publisher : publishers) {
#if KVTIER_WITH_ZMQ
          if (!nb::isinstance<events::ZmqEventPublisher>(publisher)) {
            throw nb::type_error(("publishers must be kvtier.ZmqEventPublisher objects, not " +
                                  std::string(nb::type_name(publisher.type()).c_str()))
                                     .c_str());
          }
          auto sink = nb::cast<std::shared_ptr<events::ZmqEventPublisher>>(publisher);
          sink->set_block_size(block_size);
          sinks.push_back(std::move(sink));
#else
          (void)publisher;
          throw ConfigError("this build of kvtier has no ZMQ publisher (libzmq3-dev and libmsgpack-cxx-dev)");
#endif
        }
        ManagerOptions options{.seed = seed, .max_pending_events = max_pending_events};
        session::SessionConfig& config = options.session;
        config.set_backend(backend, eviction);
        if (native_eviction) config.manager.native_eviction = g1::parse_eviction_backend(*native_eviction);
        if (g2_eviction) config.g2_eviction = g1::parse_eviction_backend(*g2_eviction);
        config.g2_admission = offload::parse_tier_admission(g2_admission);
        config.g3_admission = offload::parse_tier_admission(g3_admission);
        config.g4_admission = offload::parse_tier_admission(g4_admission);
        config.manager.capacity = capacity;
        config.manager.block_size = block_size;
        config.manager.dp_rank = dp_rank;
        config.manager.enable_prefix_caching = prefix_caching;
        config.geometry = KvGeometry{.layers = layers,
                                     .kv_heads = kv_heads,
                                     .head_dim = head_dim,
                                     .dtype = parse_dtype(dtype),
                                     .tokens_per_block = block_size};
        config.layout = parse_page_layout(layout);
        config.device = memory::parse_runtime_choice(device);
        config.host_blocks = host_blocks;
        config.offload_batch = offload_batch;
        config.verify_swaps = verify_swaps;
        if (disk_sync != "none" && disk_sync != "batch") {
          throw ConfigError("disk_sync must be none or batch, not '" + disk_sync + "'");
        }
        if (disk_path) {
          config.disk = session::DiskTierSettings{.path = *disk_path,
                                                  .blocks = disk_blocks,
                                                  .queue_depth = disk_queue_depth,
                                                  .reformat = disk_reformat,
                                                  .sync_batch = disk_sync == "batch"};
        } else if (disk_blocks != 0 || disk_reformat || disk_sync != "none") {
          throw ConfigError("disk_blocks, disk_reformat and disk_sync need disk_path");
        }
        if (shared_tier) {
          config.shared = session::SharedTierSettings{.urls = *shared_tier,
                                                      .key_namespace = std::move(shared_namespace),
                                                      .ttl_seconds = shared_ttl,
                                                      .timeout_ms = shared_timeout_ms};
        }
        if (tier_key_file) config.tier_key_file = *tier_key_file;
        config.manager.groups = groups_from_python(groups, model_name, model_config, kv_cache_dtype, config.geometry);
        // A model's attention block may be raised to cover its Mamba state, as vLLM does.
        config.manager.block_size_fixed = !model_name && !model_config;
        new (self) PyManager(std::move(options), std::move(sinks));
      },
      // The defaults are every front door's (session::SessionConfig).
      nb::kw_only(), "backend"_a = g1::backend_name(kDefaults.manager.backend), "eviction"_a = nb::none(),
      "capacity"_a = kDefaults.manager.capacity, "block_size"_a = kDefaults.manager.block_size,
      "layers"_a = kDefaults.geometry.layers, "kv_heads"_a = kDefaults.geometry.kv_heads,
      "head_dim"_a = kDefaults.geometry.head_dim, "dtype"_a = dtype_name(kDefaults.geometry.dtype),
      "layout"_a = page_layout_name(kDefaults.layout), "device"_a = "auto", "host_blocks"_a = kDefaults.host_blocks,
      "offload_batch"_a = nb::none(), "verify_swaps"_a = kDefaults.verify_swaps, "disk_path"_a = nb::none(),
      "disk_blocks"_a = 0, "disk_queue_depth"_a = session::DiskTierSettings{}.queue_depth, "disk_reformat"_a = false,
      "shared_tier"_a = nb::none(), "shared_namespace"_a = session::SharedTierSettings{}.key_namespace,
      "shared_ttl"_a = 0, "shared_timeout_ms"_a = session::SharedTierSettings{}.timeout_ms,
      "tier_key_file"_a = nb::none(), "prefix_caching"_a = kDefaults.manager.enable_prefix_caching,
      "dp_rank"_a = kDefaults.manager.dp_rank, "seed"_a = 0,
      "max_pending_events"_a = ManagerOptions{}.max_pending_events, "publishers"_a = std::vector<nb::handle>{},
      "groups"_a = nb::none(), "model"_a = nb::none(), "model_config"_a = nb::none(), "kv_cache_dtype"_a = nb::none(),
      "native_eviction"_a = nb::none(), "g2_eviction"_a = nb::none(),
      "g2_admission"_a = offload::tier_admission_name(kDefaults.g2_admission),
      "g3_admission"_a = offload::tier_admission_name(kDefaults.g3_admission),
      "g4_admission"_a = offload::tier_admission_name(kDefaults.g4_admission), "disk_sync"_a = "none");
  c.def_prop_ro("backend", [](PyManager& m) { return std::string(g1::backend_name(m.manager().backend())); })
      .def_prop_ro("eviction",
                   [](PyManager& m) {
                     return m.manager().backend() == g1::G1Backend::Kvbm
                                ? std::optional<std::string>(g1::eviction_backend_name(m.manager().eviction_backend()))
                                : std::nullopt;
                   })
      .def_prop_ro("capacity", [](PyManager& m) { return m.manager().max_capacity(); })
      .def_prop_ro("has_groups", [](PyManager& m) { return m.manager().has_groups(); })
      .def_prop_ro(
          "groups",
          [](PyManager& m) -> nb::object {
            const ModelGeometry* geometry = m.manager().geometry();
            if (geometry == nullptr) return nb::none();
            nlohmann::ordered_json out;
            model::describe_groups(*geometry, out);
            // What a model integration needs beyond the script's answer: each group's layers and span.
            for (std::size_t g = 0; g < geometry->group_count(); ++g) {
              const GroupSpec& spec = geometry->groups()[g].spec;
              out["groups"][g]["layers"] = spec.layers;
              if (spec.sliding_window != 0) out["groups"][g]["sliding_window"] = spec.sliding_window;
              if (spec.attention_chunk_size != 0) out["groups"][g]["attention_chunk_size"] = spec.attention_chunk_size;
            }
            return nb::module_::import_("json").attr("loads")(out.dump());
          },
          "The resolved KV cache groups (groups: kind, block_size, page_bytes, padded_page_bytes, layers, "
          "sliding_window or attention_chunk_size; scheduler_block_size, hash_block_size), or None.")
      .def_prop_ro(
          "null_page",
          [](PyManager& m) -> std::optional<std::uint32_t> {
            const auto page = m.manager().null_page();
            return page ? std::optional<std::uint32_t>(page->value()) : std::nullopt;
          },
          "The null page's id in block tables (a manager with groups), or None.")
      .def_prop_ro("block_size", [](PyManager& m) { return m.manager().block_size(); })
      .def_prop_ro("device",
                   [](PyManager& m) { return std::string(memory::runtime_kind_name(m.session().runtime().kind())); })
      .def_prop_ro("dtype",
                   [](PyManager& m) { return std::string(dtype_name(m.session().pool().layout().geometry().dtype)); })
      .def_prop_ro("layout",
                   [](PyManager& m) { return std::string(page_layout_name(m.session().pool().layout().layout())); })
      .def_prop_ro("layers", [](PyManager& m) { return m.session().pool().layout().geometry().layers; })
      .def_prop_ro("kv_heads", [](PyManager& m) { return m.session().pool().layout().geometry().kv_heads; })
      .def_prop_ro("head_dim", [](PyManager& m) { return m.session().pool().layout().geometry().head_dim; })
      .def_prop_ro("page_bytes", [](PyManager& m) { return m.session().pool().layout().page_bytes(); })
      .def("metrics", &metrics,
           "Block counts (the spec's §1.4), the G2 tier's counters, metadata bytes, dropped events.")
      .def("prometheus_text", &prometheus_text,
           "Every tier's usage, hits, misses, evictions, copies and failures in Prometheus' text format "
           "(kvtier:* series, docs/metrics.md); hits count at each request's first allocate().")
      .def(
          "audit", [](PyManager& m) { m.manager().audit(); },
          "Checks the backend's invariants (InvariantError if broken).")
      .def("close", &PyManager::close,
           "Waits for the copies in flight, then frees the manager, its G2 tier and its callbacks; the G1 pages live "
           "on while a view of them does. Every later call raises ContractError. Idempotent.")
      .def_prop_ro("closed", &PyManager::closed)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__", [](PyManager& m, nb::handle, nb::handle, nb::handle) { m.close(); }, nb::arg().none(),
          nb::arg().none(), nb::arg().none());
  bind_request_calls(c);
  bind_page_calls(c);
  bind_events(c);
  bind_move_block_calls(c);
  bind_offload_calls(c);
  bind_attention(c);
  bind_group_kernels(c);
}

}  // namespace kvtier::python
