#include "kvtier/memory/memory_budget.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::memory {
namespace {

std::optional<std::size_t> read_number(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return static_cast<std::size_t>(std::stoull(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::size_t> meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / double(1ULL << 30));
  return text;
}

}  // namespace

std::optional<std::size_t> available_host_memory() {
  std::optional<std::size_t> available = meminfo_available();
  const auto limit = read_number("/sys/fs/cgroup/memory.max");
  const auto current = read_number("/sys/fs/cgroup/memory.current");
  if (limit && current) {
    const std::size_t room = *limit > *current ? *limit - *current : 0;
    available = available ? std::min(*available, room) : room;
  }
  return available;
}

void check_allocation_fits(std::size_t bytes, std::size_t available, const char* what, const char* where) {
  const auto allowed = static_cast<std::size_t>(kMaxAllocationShare * static_cast<double>(available));
  if (bytes <= allowed) return;
  throw AllocationError(std::string(what) + " allocation of " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                        ") exceeds 90% of the " + std::to_string(available) + " bytes (" + gib(available) + ") of " +
                        where + " available");
}

void check_host_allocation(std::size_t bytes, const char* what) {
  if (bytes < kCheckedAllocationBytes) return;
  if (const auto available = available_host_memory()) check_allocation_fits(bytes, *available, what, "host memory");
}

}  // namespace kvtier::memory
