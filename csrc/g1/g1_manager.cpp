#include "kvtier/g1/g1_manager.hpp"

#include <atomic>
#include <string>

#include "g1/common/contract_checks.hpp"
#include "g1/kvbm/kvbm_backend.hpp"
#include "g1/native/groups/grouped_backend.hpp"
#include "g1/native/native_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {
namespace {

std::uint64_t next_manager_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

std::unique_ptr<BlockManager> G1Manager::make_backend() {
  const G1ManagerConfig& config = config_;
  KvEventPublisher& publisher = *publisher_;
  if (config.capacity == 0) throw ConfigError("G1 capacity must be at least one block");
  if (config.block_size < 2)
    throw ConfigError("block_size must be at least 2, got " + std::to_string(config.block_size));
  if (config.native_eviction && config.backend != G1Backend::Native) {
    throw ConfigError("native_eviction orders the native backend's pool: the KVBM backend takes eviction");
  }
  if (!config.groups.empty()) {
    geometry_ = ModelGeometry::resolve(config.groups, config.block_size, config.block_size_fixed);
    if (geometry_->has_null_page()) {
      if (config.native_eviction) {
        throw ConfigError("native_eviction orders one group's pool: a manager with KV cache groups keeps vLLM's LRU");
      }
      if (config.backend == G1Backend::Kvbm) {
        throw ConfigError(
            "the KVBM backend has no KV cache groups (Dynamo's KVBM has no hybrid support, dynamo#13755): a "
            "hybrid model (" +
            std::to_string(geometry_->group_count()) + " groups) needs the native backend");
      }
      config_.block_size = geometry_->hash_block_size();
      auto grouped =
          std::make_unique<GroupedBackend>(*geometry_, config.capacity, config.enable_prefix_caching, publisher);
      grouped_ = grouped.get();
      return grouped;
    }
    // One full-attention group is today's manager, at that group's block size.
    KVTIER_EXPECTS(geometry_->groups()[0].spec.block_size == config.block_size, "a single full_attention group of ",
                   geometry_->groups()[0].spec.block_size, " tokens a block on a manager of block_size ",
                   config.block_size, ": give them equal");
  }
  if (config.backend == G1Backend::Kvbm) {
    return std::make_unique<KvbmBackend>(config.capacity, config.block_size, config.eviction, publisher);
  }
  return std::make_unique<NativeBackend>(config.capacity, config.block_size, config.enable_prefix_caching, publisher,
                                         config.native_eviction);
}

const char* backend_name(G1Backend backend) noexcept { return backend == G1Backend::Native ? "native" : "kvbm"; }

G1Manager::G1Manager(G1ManagerConfig config, std::vector<std::shared_ptr<KvEventSink>> sinks)
    : config_(config),
      id_(next_manager_id()),
      publisher_(std::make_unique<KvEventPublisher>(config.dp_rank)),
      backend_(make_backend()) {
  for (auto& sink : sinks) publisher_->attach(std::move(sink));
}

G1Manager::~G1Manager() = default;
G1Manager::G1Manager(G1Manager&&) noexcept = default;

G1Metrics G1Manager::metrics() const { return backend_->metrics(); }
bool G1Manager::has_owner(OwnerId owner) const { return backend_->has_owner(owner); }
std::span<const PageId> G1Manager::block_table(OwnerId owner) const { return backend_->block_table(owner); }
std::span<const UniqueBlock> G1Manager::owned_blocks(OwnerId owner) const { return backend_->owned_blocks(owner); }
std::vector<OwnerId> G1Manager::owners() const { return backend_->owners(); }
bool G1Manager::is_cached(SequenceHash hash) const { return backend_->is_cached(hash); }
std::size_t G1Manager::metadata_bytes() const { return backend_->metadata_bytes(); }
void G1Manager::audit() const { backend_->audit(); }
std::vector<std::pair<PageId, SequenceHash>> G1Manager::registered_blocks() const {
  return backend_->registered_blocks();
}

G1Manager G1Manager::with_eviction_backend(G1ManagerConfig config, EvictionBackend eviction,
                                           std::vector<std::shared_ptr<KvEventSink>> sinks) {
  config.backend = G1Backend::Kvbm;
  config.eviction = eviction;
  return G1Manager(config, std::move(sinks));
}

void G1Manager::check_token_ids(const std::vector<TokenId>& tokens) const {
  KVTIER_EXPECTS(tokens.size() == config_.block_size,
                 "token ids must hold block_size (" + std::to_string(config_.block_size) +
                     ") tokens per full block, got " + std::to_string(tokens.size()));
}

void G1Manager::validate_use(const UseSignal& use) const {
  // One walk over the blocks for every shape rule, checked in the facade's
  // order: PLHs, token-id lengths, then the rest (detail::check_use_shape).
  std::size_t full = 0;
  bool partial_inside = false;
  for (std::size_t i = 0; i < use.blocks.size(); ++i) {
    if (use.blocks[i].is_full()) {
      ++full;
    } else if (i + 1 < use.blocks.size()) {
      partial_inside = true;
    }
  }
  KVTIER_EXPECTS(use.plhs.size() == full, "PLHs must align with full blocks");
  if (use.token_ids) {
    for (const auto& tokens : *use.token_ids) check_token_ids(tokens);
  }
  detail::check_use_shape(use, full, partial_inside);
}

void G1Manager::validate_signal(const MoveBlock& signal) const {
  if (const auto* use = std::get_if<UseSignal>(&signal)) {
    validate_use(*use);
  } else if (const auto* promote = std::get_if<PromoteSignal>(&signal); promote && promote->token_ids) {
    check_token_ids(*promote->token_ids);
  }
}

G1Acquire G1Manager::process_for_request(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) {
  validate_signal(signal);
  return backend_->process(owner, signal, reusable_prefix_blocks);
}

G1Acquire G1Manager::process_for_request(OwnerId owner, const UseSignal& signal, std::size_t reusable_prefix_blocks) {
  validate_use(signal);
  return backend_->process_use(owner, signal, reusable_prefix_blocks);
}

G1Acquire G1Manager::process_for_request(OwnerId owner, const UseSignal& signal, const ComputedPrefix& computed) {
  validate_use(signal);
  return backend_->process_use_computed(owner, signal, computed);
}

const ComputedPrefix& G1Manager::computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const {
  backend_->computed_prefix(blocks, into);
  return into;
}

G1Acquire G1Manager::process_for_request(OwnerId owner, const DerefSignal& signal,
                                         std::size_t /*reusable_prefix_blocks*/) {
  backend_->process_deref(owner, signal);
  return G1Acquire::ready(signal.blocks.size());
}

void G1Manager::finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after,
                                         ActiveSequence* sequence) {
  if (config_.backend != G1Backend::Native) return;
  if (grouped_ != nullptr) {
    KVTIER_EXPECTS(sequence != nullptr, "a manager with KV cache groups finalizes a request with its sequence");
    grouped_->finalize(owner, *sequence, after);
    return;
  }
  // The tail's Promote is checked before the finalize publishes anything, so
  // a refused call changes nothing (issue #13).
  if (sequence != nullptr && sequence->promotes_computed_tail(after)) {
    const auto owned = has_owner(owner) ? owned_blocks(owner) : std::span<const UniqueBlock>{};
    KVTIER_EXPECTS(!owned.empty() && owned.back() == sequence->blocks().back(),
                   "partial block not found: the sequence's tail " + sequence->blocks().back().to_string() +
                       " is not owner " + std::to_string(owner.value()) + "'s last block");
  }
  // #12222: earlier blocks first; the scan stops at the still-partial tail,
  // whose Promote then names the just-published block as its parent.
  backend_->finalize_computed_prefix(owner, before, after);
  if (sequence == nullptr) return;
  if (auto promote = sequence->promote_computed_tail(after)) backend_->process(owner, *promote, 0);
}

PrefillCost G1Manager::get_prefill_cost(const ActiveSequence& sequence) const {
  return backend_->prefill_cost(sequence);
}

void G1Manager::check_handle(std::uint64_t manager, G1Backend backend, const char* what) const {
  KVTIER_EXPECTS(backend == config_.backend, std::string(what) + " belongs to a different G1 backend (" +
                                                 backend_name(backend) + ", this manager is " +
                                                 backend_name(config_.backend) + ")");
  KVTIER_EXPECTS(manager == id_, std::string(what) + " belongs to a different G1 manager");
}

std::optional<DecodeReservation> G1Manager::reserve_decode_blocks(std::size_t blocks) {
  const auto id = backend_->reserve_decode_blocks(blocks);
  if (!id) return std::nullopt;
  return DecodeReservation{.manager = id_, .id = *id, .backend = config_.backend, .blocks = blocks};
}

G1Acquire G1Manager::process_decode_signal_for_request(OwnerId owner, const MoveBlock& signal,
                                                       const DecodeReservation& reservation) {
  check_handle(reservation.manager, reservation.backend, "decode reservation");
  validate_signal(signal);
  return backend_->process_decode(owner, signal, reservation.id);
}

void G1Manager::release_decode_reservation(DecodeReservation&& reservation) {
  check_handle(reservation.manager, reservation.backend, "decode reservation");
  backend_->release_decode(reservation.id);
}

std::optional<DestinationReservation> G1Manager::reserve_destination_at(OwnerId owner, const ActiveSequence& sequence,
                                                                        double eviction_now_ms) {
  const auto grant = backend_->reserve_destination(owner, sequence, eviction_now_ms);
  if (!grant) return std::nullopt;
  return DestinationReservation{.manager = id_,
                                .id = grant->id,
                                .backend = config_.backend,
                                .owner = owner,
                                .transferable_prompt_tokens = grant->transferable_prompt_tokens};
}

void G1Manager::activate_destination(DestinationReservation&& reservation) {
  check_handle(reservation.manager, reservation.backend, "destination reservation");
  backend_->activate_destination(reservation.id);
}

void G1Manager::cancel_destination(DestinationReservation&& reservation) {
  check_handle(reservation.manager, reservation.backend, "destination reservation");
  backend_->cancel_destination(reservation.id);
}

}  // namespace kvtier::g1
