#include "kvtier/tiers/disk/direct_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::disk {

DirectFile::DirectFile(const std::filesystem::path& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // no O_DIRECT here
  if (fd_ < 0) throw ConfigError("cannot open " + path.string() + ": " + std::strerror(errno));
  // One writer per file: two processes on one tier would overwrite each other's
  // slots. A process killed with I/O in flight keeps its lock until the kernel
  // has torn its io_uring down (asynchronously, milliseconds): wait up to a second.
  int locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  for (int tries = 0; locked != 0 && errno == EWOULDBLOCK && tries < 100; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  }
  if (locked != 0) {
    const int error = errno;
    ::close(fd_);
    throw ConfigError(path.string() + (error == EWOULDBLOCK
                                           ? " is in use by another kvtier process"
                                           : std::string(" cannot be locked: ") + std::strerror(error)));
  }
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
