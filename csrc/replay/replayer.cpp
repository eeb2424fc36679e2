#include "kvtier/replay/replayer.hpp"

#include <memory>

#include "kvtier/core/errors.hpp"
#include "replay_run.hpp"

namespace kvtier::replay {

VerifyMode parse_verify_mode(const std::string& name) {
  if (name == "off") return VerifyMode::Off;
  if (name == "sample") return VerifyMode::Sample;
  if (name == "full") return VerifyMode::Full;
  throw ConfigError("verify must be off, sample or full, not '" + name + "'");
}

ReplayReport replay(memory::Runtime& runtime, const ReplayConfig& config, const std::vector<TraceRequest>& requests) {
  return Replay(runtime, config, requests).run();
}

RouteMode parse_route_mode(const std::string& name) {
  if (name == "round_robin") return RouteMode::RoundRobin;
  if (name == "hash") return RouteMode::Hash;
  throw ConfigError("route must be round_robin or hash, not '" + name + "'");
}

std::vector<ReplayReport> replay_instances(memory::Runtime& runtime, const ReplayConfig& config,
                                           const std::vector<TraceRequest>& requests) {
  const std::size_t n = config.instances;
  if (n == 0 || n > 64) throw ConfigError("instances must be in 1..64");
  if (!config.instance_outputs.empty() && config.instance_outputs.size() != n) {
    throw ConfigError(std::to_string(config.instance_outputs.size()) + " instance outputs for " + std::to_string(n) +
                      " instances");
  }
  if (n == 1 && config.instance_outputs.empty()) return {replay(runtime, config, requests)};
  if (config.step_end || config.observe_metrics) {
    throw ConfigError("several instances publish their KV events and metrics each (instance_outputs)");
  }
  std::vector<std::vector<TraceRequest>> parts(n);
  std::vector<std::vector<std::size_t>> indexes(n);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const TraceRequest& r = requests[i];
    // Hash: the first prompt block's id, mixed (ids are small consecutive integers).
    const std::size_t to = config.route == RouteMode::RoundRobin || r.hash_ids.empty()
                               ? i % n
                               : static_cast<std::size_t>((r.hash_ids.front() * 0x9E3779B97F4A7C15ULL) >> 32) % n;
    parts[to].push_back(r);
    indexes[to].push_back(i);
  }
  std::vector<std::unique_ptr<Replay>> replays;
  for (std::size_t i = 0; i < n; ++i) {
    ReplayConfig each = config;
    each.progress = nullptr;
    each.instance_outputs.clear();
    each.session.manager.dp_rank += static_cast<std::uint32_t>(i);  // a data-parallel rank each, as vLLM's DP engines
    // A disk tier is one process's file: each instance keeps its own, in a directory of its own.
    if (each.session.disk) each.session.disk->path /= "instance-" + std::to_string(i);
    if (!config.instance_outputs.empty()) {
      const ReplayConfig::InstanceOutputs& own = config.instance_outputs[i];
      each.session.event_sinks.insert(each.session.event_sinks.end(), own.event_sinks.begin(), own.event_sinks.end());
      each.step_end = own.step_end;
      each.observe_metrics = own.observe_metrics;
    }
    replays.push_back(std::make_unique<Replay>(runtime, each, parts[i], std::move(indexes[i])));
  }
  // In virtual time: the instance furthest behind steps next, so no instance
  // sees what another publishes "later".
  for (;;) {
    Replay* next = nullptr;
    for (const auto& r : replays) {
      if (!r->finished() && (next == nullptr || r->now() < next->now())) next = r.get();
    }
    if (next == nullptr) break;
    next->advance();
    if (config.progress) {
      std::size_t done = 0;
      for (const auto& r : replays) done += r->requests_done();
      config.progress(done, requests.size());
    }
  }
  std::vector<ReplayReport> reports;
  for (const auto& r : replays) reports.push_back(r->finish());
  return reports;
}

}  // namespace kvtier::replay
