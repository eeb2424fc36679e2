#include "kvtier/tiers/disk/direct_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::disk {

DirectFile::DirectFile(const std::filesystem::path& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // no O_DIRECT here
  if (fd_ < 0) throw ConfigError("cannot open " + path.string() + ": " + std::strerror(errno));
}

DirectFile::DirectFile(DirectFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)), direct_(other.direct_) {}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    direct_ = other.direct_;
  }
  return *this;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t DirectFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw ConfigError(std::string("cannot stat the disk tier's file: ") + std::strerror(errno));
  return static_cast<std::uint64_t>(st.st_size);
}

void DirectFile::resize(std::uint64_t bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    throw ConfigError("cannot size the disk tier's file to " + std::to_string(bytes) +
                      " bytes: " + std::strerror(errno));
  }
}

}  // namespace kvtier::tiers::disk
