#include "info_command.hpp"

#include "model_info.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::cli {
namespace {

struct InfoOptions {
  std::string device = "auto";
  std::string layout = "page-major";
  std::string dtype = "bf16";
  std::uint32_t layers = 32;  // a Llama-3-8B-like default: 2 MiB pages
  std::uint32_t kv_heads = 8;
  std::uint32_t head_dim = 128;
  std::uint32_t block_size = 16;
  std::uint32_t capacity = 16384;
  std::uint32_t host_blocks = 0;  // > 0: allocate a G2 slab of this many pages and time it
  std::string disk_path;          // non-empty: read the G3 tier there (nothing is changed) and describe it
  std::uint32_t disk_blocks = 0;  // > 0: also how many blocks a tier of this capacity would drop
  std::string tier_key_file;      // the key its records are checked against (default: KVTIER_TIER_KEY_FILE)
  bool json = false;
  ModelInfoOptions model;  // --model / --model-config: a real model's groups on a memory size
};

nlohmann::json describe(const InfoOptions& options) {
  const KvGeometry geometry{.layers = options.layers,
                            .kv_heads = options.kv_heads,
                            .head_dim = options.head_dim,
                            .dtype = parse_dtype(options.dtype),
                            .tokens_per_block = options.block_size};
  const KvLayout layout(geometry, parse_page_layout(options.layout), options.capacity);
  const auto runtime = memory::make_runtime(memory::parse_runtime_choice(options.device));
  const memory::DeviceInfo device = runtime->device_info();
  nlohmann::json out = {
      {"version", KVTIER_VERSION},
      {"runtime", memory::runtime_kind_name(runtime->kind())},
      {"cuda_compiled", memory::cuda_compiled()},
      {"cuda_devices", memory::cuda_device_count()},
      {"kv_events_compiled", KVTIER_WITH_ZMQ == 1},
      {"prometheus_compiled", KVTIER_WITH_PROMETHEUS == 1},
      {"device", {{"name", device.name}, {"total_bytes", device.total_bytes}, {"free_bytes", device.free_bytes}}},
      {"layout",
       {{"kind", page_layout_name(layout.layout())},
        {"layers", geometry.layers},
        {"kv_heads", geometry.kv_heads},
        {"head_dim", geometry.head_dim},
        {"dtype", dtype_name(geometry.dtype)},
        {"tokens_per_block", geometry.tokens_per_block},
        {"page_bytes", layout.page_bytes()},
        {"chunks_per_page", layout.chunks_per_page()},
        {"chunk_bytes", layout.chunk_bytes()},
        {"capacity", layout.capacity()},
        {"slab_bytes", layout.slab_bytes()}}},
  };
  if (options.host_blocks > 0) {
    // What the offload engine does once at start: pinned, page-major, in pieces of at most 64 GiB.
    const KvLayout host_layout(geometry, PageLayout::PageMajor, options.host_blocks);
    const auto start = std::chrono::steady_clock::now();
    const memory::KvPool host(*runtime, host_layout, memory::PoolMemory::PinnedHost);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out["host_tier"] = {{"blocks", options.host_blocks},
                        {"bytes", host_layout.slab_bytes()},
                        {"pieces", host.pieces()},
                        {"allocation_seconds", seconds}};
  }
  out["disk_tier_compiled"] = session::disk_tier_available();
  if (!options.disk_path.empty()) {
    // Read, never changed: no directory is made, no file created, sized, locked or written.
    std::optional<tiers::TierKey> key;
    if (!options.tier_key_file.empty()) {
      key = tiers::TierKey::from_file(options.tier_key_file);
    } else if (const auto file = tiers::tier_key_file_from_environment()) {
      key = tiers::TierKey::from_file(*file);
    }
    const session::DiskTierInspection seen = session::inspect_disk_tier(
        options.disk_path, KvLayout(geometry, PageLayout::PageMajor, 1),
        options.disk_blocks > 0 ? std::optional<std::uint32_t>(options.disk_blocks) : std::nullopt,
        key ? &*key : nullptr);
    out["disk_tier"] = {{"path", options.disk_path},
                        {"file", seen.file.string()},
                        {"exists", seen.exists},
                        {"state", seen.state},
                        {"file_bytes", seen.file_bytes},
                        {"slot_bytes", seen.slot_bytes},
                        {"slots", seen.slots},
                        {"resident_blocks", seen.blocks},
                        {"torn_slots", seen.torn},
                        {"superseded_slots", seen.superseded},
                        {"other_layout_records", seen.other_layout},
                        {"unauthenticated_records", seen.unauthenticated},
                        {"blocks", options.disk_blocks},
                        {"would_drop", seen.would_drop}};
  }
  if (options.model.wanted()) out["model"] = describe_model(options.model);
  if (runtime->kind() == memory::RuntimeKind::Cuda) {
    out["device"]["compute_capability"] =
        std::to_string(device.compute_capability_major) + "." + std::to_string(device.compute_capability_minor);
  }
  return out;
}

void print_text(const nlohmann::json& info) {
  const auto& device = info["device"];
  const auto& layout = info["layout"];
  const auto gib = [](std::size_t bytes) { return static_cast<double>(bytes) / double(1ULL << 30); };
  std::cout << "kvtier " << info["version"].get<std::string>() << "\n"
            << "runtime:  " << info["runtime"].get<std::string>()
            << (info["cuda_compiled"].get<bool>() ? " (CUDA compiled, " : " (CUDA not compiled, ")
            << info["cuda_devices"].get<int>() << " device(s) visible)\n"
            << "device:   " << device["name"].get<std::string>() << ", "
            << gib(device["total_bytes"].get<std::size_t>()) << " GiB total, "
            << gib(device["free_bytes"].get<std::size_t>()) << " GiB free\n"
            << "layout:   " << layout["kind"].get<std::string>() << ", " << layout["layers"] << " layers x "
            << layout["kv_heads"] << " kv heads x " << layout["head_dim"] << " dim, "
            << layout["dtype"].get<std::string>() << ", " << layout["tokens_per_block"] << " tokens per block\n"
            << "page:     " << layout["page_bytes"] << " bytes (" << layout["chunks_per_page"] << " chunk(s) of "
            << layout["chunk_bytes"] << " bytes)\n"
            << "slab:     " << layout["capacity"] << " pages = " << gib(layout["slab_bytes"].get<std::size_t>())
            << " GiB\n"
            << "built in: KV events on ZMQ " << (info["kv_events_compiled"].get<bool>() ? "yes" : "no")
            << ", Prometheus metrics " << (info["prometheus_compiled"].get<bool>() ? "yes" : "no")
            << ", io_uring disk tier " << (info["disk_tier_compiled"].get<bool>() ? "yes" : "no") << "\n";
  if (info.contains("host_tier")) {
    const auto& host = info["host_tier"];
    std::cout << "G2 tier:  " << host["blocks"] << " pinned pages = " << gib(host["bytes"].get<std::size_t>())
              << " GiB in " << host["pieces"] << " allocation(s), allocated in "
              << host["allocation_seconds"].get<double>() << " s\n";
  }
  if (info.contains("disk_tier")) {
    const auto& disk = info["disk_tier"];
    std::cout << "G3 tier:  " << disk["file"].get<std::string>() << ": ";
    if (!disk["exists"].get<bool>()) {
      std::cout << "none there\n";
    } else if (disk["state"] != "ok") {
      std::cout << disk["state"].get<std::string>() << " (" << disk["file_bytes"]
                << " bytes); a session would refuse it\n";
    } else {
      std::cout << disk["resident_blocks"] << " blocks in " << disk["slots"] << " slots of " << disk["slot_bytes"]
                << " bytes (" << gib(disk["file_bytes"].get<std::size_t>()) << " GiB), " << disk["torn_slots"]
                << " torn, " << disk["superseded_slots"] << " superseded, " << disk["unauthenticated_records"]
                << " unauthenticated";
      if (disk["blocks"].get<std::uint32_t>() > 0) {
        std::cout << "; opened with " << disk["blocks"] << " blocks it would drop the " << disk["would_drop"]
                  << " oldest";
      }
      std::cout << "\n";
    }
  }
  if (info.contains("model")) print_model(info["model"]);
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* info = app.add_subcommand("info", "Show the chosen runtime, the device and a KV layout's page size");
  info->add_option("--device", options->device, "auto | host | cuda")->capture_default_str();
  info->add_option("--layout", options->layout, "page-major | layer-major")->capture_default_str();
  info->add_option("--dtype", options->dtype, "bf16 | fp16 | fp32 | fp8")->capture_default_str();
  info->add_option("--layers", options->layers)->capture_default_str();
  info->add_option("--kv-heads", options->kv_heads)->capture_default_str();
  info->add_option("--head-dim", options->head_dim)->capture_default_str();
  info->add_option("--block-size", options->block_size, "tokens per block")->capture_default_str();
  info->add_option("--capacity", options->capacity, "G1 pages")->capture_default_str();
  info->add_option("--host-blocks", options->host_blocks, "G2 pages to allocate (pinned) and time; 0 = none")
      ->capture_default_str();
  auto* disk_path = info->add_option("--disk-path", options->disk_path,
                                     "describe the G3 disk tier in this directory (read only: nothing is changed)");
  info->add_option("--disk-blocks", options->disk_blocks, "a G3 capacity: how many blocks it would drop")
      ->needs(disk_path);
  info->add_option("--tier-key-file", options->tier_key_file, "the tier key its records were written with")
      ->needs(disk_path);
  info->add_option("--model", options->model.model,
                   "a preset of a real model: llama-3.1-8b, gpt-oss-20b, gpt-oss-120b, gemma-3-27b, llama-4-scout, "
                   "qwen3-next-80b-a3b, nemotron-h-8b, deepseek-v3 (docs/models.md)");
  info->add_option("--model-config", options->model.model_config, "a Hugging Face config.json");
  info->add_option("--gpu-memory-gb", options->model.gpu_memory_gb, "KV cache memory (GiB) the model's pool gets")
      ->capture_default_str();
  info->add_flag("--no-hybrid", options->model.no_hybrid,
                 "every attention layer in one full-attention group (vLLM's --disable-hybrid-kv-cache-manager)");
  info->add_option("--kv-cache-dtype", options->model.kv_cache_dtype,
                   "the attention groups' page format (vLLM's names): auto, bfloat16, float16, float32, fp8, "
                   "fp8_per_token_head, "
                   "int8_per_token_head, nvfp4, fp8_ds_mla")
      ->capture_default_str();
  info->add_flag("--json", options->json, "print one JSON object");
  info->callback([options, &exit_code] {
    try {
      const nlohmann::json out = describe(*options);
      if (options->json) {
        std::cout << out.dump() << '\n';
      } else {
        print_text(out);
      }
      exit_code = 0;
    } catch (const std::exception& error) {
      std::cerr << "kvtier info: " << error.what() << '\n';
      exit_code = 2;  // as every other command's refusal
    }
  });
}

}  // namespace kvtier::cli
