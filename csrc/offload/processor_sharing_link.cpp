#include "kvtier/offload/processor_sharing_link.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace kvtier::offload {
namespace {
constexpr double kSlack = 1e-9;  // §5.4: a finish at now + 1e-9 counts as now
}

void ProcessorSharingLink::set_bandwidth(double bytes_per_ms) { bandwidth_ = bytes_per_ms; }

void ProcessorSharingLink::start(std::uint64_t id, double now_ms, double bytes) {
  auto done = advance_to(now_ms);
  finished_.insert(finished_.end(), done.begin(), done.end());
  active_.push_back({id, std::max(bytes, 0.0)});
}

std::vector<std::uint64_t> ProcessorSharingLink::advance_to(double now_ms) {
  std::vector<std::uint64_t> completed = std::exchange(finished_, {});
  if (now_ms < last_update_) return completed;
  while (!active_.empty()) {
    const auto n = static_cast<double>(active_.size());
    double least = std::numeric_limits<double>::infinity();
    for (const Active& a : active_) least = std::min(least, a.remaining);
    const double finish = bandwidth_ <= 0.0 ? last_update_ : last_update_ + least * n / bandwidth_;
    if (finish > now_ms + kSlack) {
      const double progress = (now_ms - last_update_) * bandwidth_ / n;
      for (Active& a : active_) a.remaining -= progress;
      break;
    }
    last_update_ = finish;
    for (Active& a : active_) a.remaining -= least;
    for (const Active& a : active_) {
      if (a.remaining <= kSlack) completed.push_back(a.id);
    }
    std::erase_if(active_, [](const Active& a) { return a.remaining <= kSlack; });
  }
  last_update_ = std::max(last_update_, now_ms);
  return completed;
}

void ProcessorSharingLink::remove(std::uint64_t id) {
  std::erase_if(active_, [id](const Active& a) { return a.id == id; });
}

std::optional<double> ProcessorSharingLink::deadline(std::uint64_t id) const {
  const auto x = std::find_if(active_.begin(), active_.end(), [id](const Active& a) { return a.id == id; });
  if (x == active_.end()) return std::nullopt;
  if (bandwidth_ <= 0.0) return last_update_;
  double bytes = 0.0;
  for (const Active& a : active_) bytes += std::min(a.remaining, x->remaining);
  return last_update_ + bytes / bandwidth_;
}

std::optional<double> ProcessorSharingLink::earliest_finish() const {
  std::optional<double> earliest;
  for (const Active& a : active_) {
    const double d = *deadline(a.id);
    if (!earliest || d < *earliest) earliest = d;
  }
  return earliest;
}

}  // namespace kvtier::offload
