#include "kvtier/core/uuid.hpp"

#include <cstdio>
#include <random>

namespace kvtier {

Uuid Uuid::random() {
  thread_local std::mt19937_64 engine{[] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device();
  }()};
  std::uint64_t high = engine();
  std::uint64_t low = engine();
  high = (high & ~0xF000ULL) | 0x4000ULL;          // version 4
  low = (low & ~(0x3ULL << 62)) | (0x2ULL << 62);  // RFC 4122 variant
  return Uuid(high, low);
}

std::string Uuid::to_string() const {
  char buffer[37];
  std::snprintf(buffer, sizeof buffer, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(high_ >> 32), static_cast<unsigned long long>((high_ >> 16) & 0xFFFF),
                static_cast<unsigned long long>(high_ & 0xFFFF), static_cast<unsigned long long>(low_ >> 48),
                static_cast<unsigned long long>(low_ & 0xFFFFFFFFFFFFULL));
  return buffer;
}

}  // namespace kvtier
