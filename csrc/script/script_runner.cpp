#include "kvtier/script/script_runner.hpp"

#include <cctype>
#include <charconv>
#include <sstream>
#include <string>

#include "kvtier/core/bounded_line.hpp"
#include "kvtier/core/kv_event_json.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/model/group_specs.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "script_state.hpp"

namespace kvtier::script {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

Json failure(const std::string& message) {
  Json out;
  out["ok"] = false;
  out["error"] = message;
  return out;
}

}  // namespace

ScriptRunner::ScriptRunner(std::vector<std::shared_ptr<KvEventSink>> event_sinks) : state_(std::make_unique<State>()) {
  state_->set_event_sinks(std::move(event_sinks));
}
ScriptRunner::~ScriptRunner() = default;

bool ScriptRunner::initialized() const noexcept { return state_->initialized(); }
const g1::G1Manager* ScriptRunner::manager() const noexcept { return state_->manager(); }
std::optional<g1::OwnerId> ScriptRunner::owner_id(const std::string& label) const { return state_->owner_id(label); }

std::string ScriptRunner::partial_label(const Uuid& uuid) const { return state_->partial_label(uuid); }

std::vector<PageId> ScriptRunner::mismatched_pages(std::span<const PageId> pages,
                                                   std::span<const UniqueBlock> blocks) const {
  return state_->mismatched_pages(pages, blocks);
}

std::optional<g1::GroupPatterns> ScriptRunner::owner_patterns(const std::string& label) const {
  return state_->owner_patterns(label);
}

std::vector<PageId> ScriptRunner::mismatched_patterns(std::span<const PageId> pages,
                                                      std::span<const std::uint64_t> identities) const {
  return state_->mismatched_patterns(pages, identities);
}

std::optional<nlohmann::ordered_json> ScriptRunner::run_line(std::string_view line, std::size_t line_number) {
  const std::string at = "line " + std::to_string(line_number) + ": ";
  if (line.find('\0') != std::string_view::npos) return failure(at + "a NUL byte is not allowed in a line");
  const std::string_view text = trim(line);
  if (text.empty() || text.front() == '#') return std::nullopt;
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // a syntax error, or a number no double holds
    // The parser quotes what it read last: keep a huge literal from flooding the answer.
    constexpr std::size_t kMaxQuoted = 240;
    std::string message = error.what();
    if (message.size() > kMaxQuoted) message = message.substr(0, kMaxQuoted) + "...";
    return failure(at + "invalid JSON: " + message);
  }
  if (!object.is_object()) return failure(at + "an operation must be a JSON object");
  const Fields fields(object, line_number);
  state_->take_events();  // events of an earlier refused operation never leak into this one
  try {
    const std::string op = fields.string("op");
    Json result = state_->dispatch(fields, op);
    Json out;
    out["ok"] = true;
    for (auto it = result.begin(); it != result.end(); ++it) out[it.key()] = std::move(*it);
    out["events"] = state_->take_events();
    return out;
  } catch (const InvariantError& error) {
    // kvtier's own bug, not the line's fault: marked so tools can tell.
    state_->take_events();
    Json out = failure(state_->describe(error.what()));
    out["internal"] = true;
    return out;
  } catch (const std::exception& error) {
    state_->take_events();
    return failure(state_->describe(error.what()));
  }
}

std::string format_answer(const nlohmann::ordered_json& answer) {
  return answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int run_script(std::istream& in, std::ostream& out, std::ostream& err) {
  return run_script(in, out, err, ScriptHooks{});
}

int run_script(std::istream& in, std::ostream& out, std::ostream& err, const ScriptHooks& hooks) {
  ScriptRunner runner(hooks.event_sinks);
  std::string line;
  std::size_t number = 0;
  bool any_failed = false;
  bool saw_operation = false;
  const auto written = [&] {
    if (out) return true;
    err << "kvtier script: cannot write the output (closed, or the disk is full)\n";
    return false;
  };
  for (;;) {
    const LineRead read = read_bounded_line(in, line);
    if (read == LineRead::End) break;
    ++number;
    if (read == LineRead::TooLong) {
      // Where such a line ends is unknown (it may never end): the script stops here.
      out << format_answer(failure("line " + std::to_string(number) + ": longer than the " +
                                   std::to_string(kMaxLineBytes) + "-byte limit of a script line"))
          << '\n';
      out.flush();
      written();
      return 2;
    }
    auto result = runner.run_line(line, number);
    if (!result) continue;
    out << format_answer(*result) << '\n';
    if (!written()) return 2;
    const bool ok = result->at("ok").get<bool>();
    if (!saw_operation) {
      saw_operation = true;
      if (!ok || !runner.initialized()) {
        if (ok)
          out << format_answer(failure("line " + std::to_string(number) + ": the first operation must be init"))
              << '\n';
        out.flush();
        written();  // says so on err when the refusal could not be written either
        return 2;
      }
    }
    any_failed = any_failed || !ok;
    if (hooks.after_line) hooks.after_line(*runner.manager());
  }
  if (in.bad()) {
    err << "kvtier script: cannot read the input after line " << number << '\n';
    return 2;
  }
  out.flush();
  if (!written()) return 2;
  return any_failed ? 1 : 0;
}

std::string ScriptRunner::State::describe(std::string message) const {
  // Library messages name partial blocks by UUID and owners by number; the
  // script's user knows them by label.
  const auto is_uuid_at = [&](std::size_t at) {
    if (at + 36 > message.size()) return false;
    for (std::size_t k = 0; k < 36; ++k) {
      const char c = message[at + k];
      const bool dash = k == 8 || k == 13 || k == 18 || k == 23;
      if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  const auto is_digit = [&](std::size_t at) {
    return at < message.size() && std::isdigit(static_cast<unsigned char>(message[at]));
  };
  std::string out;
  for (std::size_t at = 0; at < message.size();) {
    if (is_uuid_at(at)) {
      const auto label = partial_by_text_.find(message.substr(at, 36));
      out += label == partial_by_text_.end() ? message.substr(at, 36) : "'" + label->second + "'";
      at += 36;
    } else if (message.compare(at, 6, "owner ") == 0 && is_digit(at + 6)) {
      std::size_t end = at + 6;
      while (is_digit(end)) ++end;
      std::uint64_t id = 0;
      std::from_chars(message.data() + at + 6, message.data() + end, id);
      const auto label = owner_labels_.find(id);
      out += label == owner_labels_.end() ? message.substr(at, end - at) : "owner " + label->second;
      at = end;
    } else {
      out += message[at++];
    }
  }
  return out;
}

Json ScriptRunner::State::take_events() {
  Json events = Json::array();
  for (const KvEvent& event : sink_->events()) events.push_back(to_json(event));
  sink_->clear();
  return events;
}

void ScriptRunner::State::require_init(const Fields& f) const {
  if (!initialized()) f.fail("the first operation must be init");
}

Json ScriptRunner::State::dispatch(const Fields& f, const std::string& op) {
  if (op == "init") return op_init(f);
  require_init(f);
  manager_->begin_step();  // each line is one scheduler step (model-geometry.md §4: Mamba states)
  if (op == "use") return op_use(f, false);
  if (op == "deref") return op_deref(f);
  if (op == "promote") return op_promote(f);
  if (op == "finalize") return op_finalize(f);
  if (op == "reserve_decode") return op_reserve_decode(f);
  if (op == "decode_use") return op_use(f, true);
  if (op == "release_decode") return op_release_decode(f);
  if (op == "sequence") return op_sequence(f);
  if (op == "allocate") return op_allocate(f);
  if (op == "generate") return op_generate(f);
  if (op == "free") return op_free(f);
  if (op == "drop") return op_drop(f);
  if (op == "prefill_cost") return op_prefill_cost(f);
  if (op == "reserve_destination") return op_reserve_destination(f);
  if (op == "activate_destination") return op_activate_destination(f);
  if (op == "cancel_destination") return op_cancel_destination(f);
  if (op == "stats") return op_stats(f);
  if (op == "cached") return op_cached(f);
  if (op == "block_table") return op_block_table(f);
  if (op == "write") return op_write(f);
  if (op == "verify") return op_verify(f);
  if (op == "wait_offload") return op_wait_offload(f);
  if (op == "host_cached") return op_host_cached(f);
  if (op == "disk_cached") return op_disk_cached(f);
  if (op == "pin_prefix") return op_pin_prefix(f);
  if (op == "swap_in") return op_swap_in(f);
  if (op == "register_swap_in") return op_register_swap_in(f);
  if (op == "cancel_swap_in") return op_cancel_swap_in(f);
  if (op == "inject_fault") return op_inject_fault(f);
  f.fail("unknown op '" + op + "'");
}

Json ScriptRunner::State::op_init(const Fields& f) {
  if (initialized()) f.fail("init may appear only once");
  session::SessionConfig config;  // the defaults every front door shares
  config.set_backend(f.string_or("backend", "native"),
                     f.has("eviction") ? std::optional<std::string>(f.string("eviction")) : std::nullopt);
  config.manager.capacity = f.u32("capacity");  // the script format requires both
  config.manager.block_size = f.u32("block_size");
  config.manager.dp_rank = f.u32_or("dp_rank", 0);
  config.manager.enable_prefix_caching = f.boolean_or("prefix_caching", true);
  config.host_blocks = f.u32_or("host_blocks", 0);
  if (f.has("offload_batch")) config.offload_batch = f.u32("offload_batch");
  config.verify_swaps = f.boolean_or("verify_swaps", false);
  if (f.has("disk_path")) {
    config.disk = session::DiskTierSettings{.path = f.string("disk_path"),
                                            .blocks = f.u32("disk_blocks"),
                                            .queue_depth = f.u32_or("disk_queue_depth", 32),
                                            .backlog = f.u32_or("disk_backlog", 128),
                                            .reformat = f.boolean_or("disk_reformat", false)};
  } else if (f.has("disk_blocks") || f.has("disk_queue_depth") || f.has("disk_backlog") || f.has("disk_reformat")) {
    f.fail("disk_blocks, disk_queue_depth, disk_backlog and disk_reformat need disk_path");
  }
  if (f.has("shared_tier")) {
    // As `kvtier replay --shared-tier` takes it: one URL, or several comma-separated.
    std::vector<std::string> urls;
    std::stringstream given(f.string("shared_tier"));
    for (std::string url; std::getline(given, url, ',');) urls.push_back(url);
    config.shared = session::SharedTierSettings{
        .urls = std::move(urls),
        .key_namespace = f.string_or("shared_namespace", session::SharedTierSettings{}.key_namespace),
        .ttl_seconds = f.u32_or("shared_ttl", 0),
        .max_in_flight = f.u32_or("shared_in_flight", session::SharedTierSettings{}.max_in_flight),
        .timeout_ms = f.u32_or("shared_timeout_ms", session::SharedTierSettings{}.timeout_ms)};
  } else if (f.has("shared_namespace") || f.has("shared_ttl") || f.has("shared_in_flight") ||
             f.has("shared_timeout_ms")) {
    f.fail("shared_namespace, shared_ttl, shared_in_flight and shared_timeout_ms need shared_tier");
  }
  if (f.has("tier_key_file")) config.tier_key_file = f.string("tier_key_file");
  config.device = memory::parse_runtime_choice(f.string_or("device", "auto"));
  if (f.has("layout")) {
    const auto& layout = f.raw("layout");
    if (!layout.is_object()) f.fail("field 'layout' must be an object");
    const Fields l(layout, f.line());
    config.geometry.layers = l.u32_or("layers", config.geometry.layers);
    config.geometry.kv_heads = l.u32_or("kv_heads", config.geometry.kv_heads);
    config.geometry.head_dim = l.u32_or("head_dim", config.geometry.head_dim);
    config.geometry.dtype = parse_dtype(l.string_or("dtype", dtype_name(config.geometry.dtype)));
    config.layout = parse_page_layout(l.string_or("kind", page_layout_name(config.layout)));
  }
  if (f.has("groups")) {
    try {
      config.manager.groups = model::parse_group_specs(f.raw("groups"), config.geometry);
    } catch (const ConfigError& error) {
      f.fail(error.what());
    }
  }
  const std::uint64_t seed = f.u64_or("seed", 0);
  config.event_sinks.push_back(sink_);
  config.event_sinks.insert(config.event_sinks.end(), event_sinks_.begin(), event_sinks_.end());
  auto made = std::make_unique<session::Session>(std::move(config));
  Json out;
  out["backend"] = g1::backend_name(made->config().manager.backend);
  out["capacity"] = made->config().manager.capacity;
  out["block_size"] = made->config().manager.block_size;
  out["device"] = memory::runtime_kind_name(made->runtime().kind());
  out["page_bytes"] = made->pool().layout().page_bytes();
  if (const ModelGeometry* geometry = made->manager().geometry()) model::describe_groups(*geometry, out);
  if (made->config().host_blocks != 0) out["host_blocks"] = made->config().host_blocks;
  if (made->config().disk) {
    const tiers::LowerTier& disk = *made->lower_tier(StorageTier::Disk);
    out["disk_blocks"] = disk.capacity();
    out["disk_recovered"] = disk.used();  // blocks an earlier run left, announced as Stored events
    out["disk_direct_io"] = session::disk_tier_facts(disk).direct_io;
  }
  if (made->config().disk || made->config().shared) {
    out["tier_key"] = made->config().effective_tier_key_file().has_value();
  }
  if (made->config().shared) {
    std::string shown;  // passwords never echoed
    for (const std::string& url : made->config().shared->urls) {
      if (!shown.empty()) shown += ',';
      shown += tiers::shared::redacted_redis_url(url);
    }
    out["shared_tier"] = shown;
  }
  session_ = std::move(made);
  manager_ = &session_->manager();
  seed_ = seed;
  return out;
}

g1::OwnerId ScriptRunner::State::owner(const Fields& f, const char* name) {
  const std::string label = f.string(name);
  const auto [it, inserted] = owners_.try_emplace(label, g1::OwnerId(owners_.size() + 1));
  if (inserted) owner_labels_.emplace(it->second.value(), label);
  return it->second;
}

UniqueBlock ScriptRunner::State::block(const Fields& f, const nlohmann::json& value, const std::string& what) {
  if (value.is_string()) {
    const std::string label = value.get<std::string>();
    auto it = partial_by_label_.find(label);
    if (it == partial_by_label_.end()) {
      if (label.find('#') != std::string::npos) {
        f.fail("unknown partial label '" + label + "' (labels with '#' name the partial blocks of sequences)");
      }
      it = add_label(label, Uuid::random());
    }
    return UniqueBlock::partial(it->second);
  }
  return UniqueBlock::full(SequenceHash(f.as_u64(value, what + " (a sequence hash or a partial label)")));
}

std::vector<UniqueBlock> ScriptRunner::State::blocks(const Fields& f, const char* name) {
  const auto& value = f.raw(name);
  if (!value.is_array()) f.fail(std::string("field '") + name + "' must be a list of blocks");
  std::vector<UniqueBlock> out;
  for (const auto& item : value) out.push_back(block(f, item, std::string("every entry of '") + name + "'"));
  return out;
}

PositionalLineageHash ScriptRunner::State::plh(const Fields& f, const nlohmann::json& value,
                                               const std::string& what) const {
  if (!value.is_object()) return PositionalLineageHash(SequenceHash(f.as_u64(value, what)), std::nullopt, 0);
  const Fields p(value, f.line());
  std::optional<SequenceHash> parent;
  if (p.has("parent")) parent = SequenceHash(p.u64("parent"));
  return PositionalLineageHash(SequenceHash(p.u64("hash")), parent, p.u64_or("position", 0));
}

std::unordered_map<std::string, Uuid>::iterator ScriptRunner::State::add_label(const std::string& label,
                                                                               const Uuid& uuid) {
  label_by_partial_.emplace(uuid, label);
  partial_by_text_.emplace(uuid.to_string(), label);
  return partial_by_label_.emplace(label, uuid).first;
}

void ScriptRunner::State::forget_label(const Uuid& uuid) {
  const auto it = label_by_partial_.find(uuid);
  if (it == label_by_partial_.end()) return;
  partial_by_label_.erase(it->second);
  partial_by_text_.erase(uuid.to_string());
  label_by_partial_.erase(it);
}

std::string ScriptRunner::State::partial_label(const Uuid& uuid) const {
  const auto it = label_by_partial_.find(uuid);
  return it == label_by_partial_.end() ? uuid.to_string() : it->second;
}

Json ScriptRunner::State::block_json(const UniqueBlock& block) const {
  if (block.is_full()) return block.hash().value();
  return partial_label(block.uuid());
}

Json ScriptRunner::State::acquire_json(const g1::G1Acquire& acquire) {
  Json out;
  switch (acquire.kind) {
    case g1::G1Acquire::Kind::Ready:
      out["result"] = "ready";
      out["count"] = acquire.count;
      break;
    case g1::G1Acquire::Kind::CapacityExhausted:
      out["result"] = "capacity_exhausted";
      break;
    case g1::G1Acquire::Kind::BlockedOnOffload:
      out["result"] = "blocked_on_offload";
      out["offload"] = acquire.offload_id;
      break;
  }
  return out;
}

}  // namespace kvtier::script
