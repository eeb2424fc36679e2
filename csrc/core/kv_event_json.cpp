#include "kvtier/core/kv_event_json.hpp"

namespace kvtier {

nlohmann::ordered_json to_json(const KvEvent& event) {
  nlohmann::ordered_json out = {{"id", event.id}, {"dp_rank", event.dp_rank}, {"tier", tier_name(event.tier)}};
  if (const auto* stored = std::get_if<KvStored>(&event.data)) {
    out["type"] = "stored";
    out["parent"] = stored->parent ? nlohmann::ordered_json(stored->parent->value()) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (const StoredBlock& block : stored->blocks) {
      blocks.push_back({{"hash", block.hash.value()}, {"local", block.local.value()}});
    }
    out["blocks"] = std::move(blocks);
    if (stored->token_ids) out["token_ids"] = stored->token_ids->nested();
  } else {
    const auto& removed = std::get<KvRemoved>(event.data);
    out["type"] = "removed";
    nlohmann::ordered_json hashes = nlohmann::ordered_json::array();
    for (SequenceHash hash : removed.hashes) hashes.push_back(hash.value());
    out["hashes"] = std::move(hashes);
  }
  if (event.group) {
    out["group"] = event.group->index;
    out["kind"] = event.group->kind;
    out["sliding_window"] = event.group->sliding_window ? nlohmann::ordered_json(*event.group->sliding_window)
                                                        : nlohmann::ordered_json(nullptr);
  }
  return out;
}

}  // namespace kvtier
