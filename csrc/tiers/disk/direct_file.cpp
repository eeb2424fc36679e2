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

DirectFile::DirectFile(const TierDirectory& directory, const std::string& name, Mode mode) {
  open_in(directory, name, mode);
}

DirectFile::DirectFile(const std::filesystem::path& path) {
  const TierDirectory directory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."),
                                TierDirectory::Access::Inspect);
  if (!directory.exists()) {
    throw ConfigError("cannot open " + path.string() + ": its directory does not exist");
  }
  open_in(directory, path.filename().string(), Mode::ReadWrite);
}

void DirectFile::open_in(const TierDirectory& directory, const std::string& name, Mode mode) {
  path_ = directory.path() / name;
  const auto refuse = [&](const std::string& why) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return ConfigError("the disk tier's file " + path_.string() + " " + why);
  };
  const int access = mode == Mode::ReadWrite ? O_RDWR | O_CREAT : O_RDONLY;
  const int flags = access | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  fd_ = ::openat(directory.fd(), name.c_str(), flags | O_DIRECT, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = ::openat(directory.fd(), name.c_str(), flags, 0600);  // no O_DIRECT here
  if (fd_ < 0) {
    const int error = errno;
    if (mode == Mode::ReadOnly && error == ENOENT) return;
    if (error == ELOOP) throw refuse("is a symbolic link: refused, nothing written (kvtier never follows one there)");
    throw refuse(std::string("cannot be opened: ") + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw refuse(std::string("cannot be examined: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw refuse("is not a regular file: refused, nothing written");
  if (st.st_uid != ::geteuid()) {
    throw refuse("belongs to uid " + std::to_string(st.st_uid) + ", not to this user: refused, nothing written");
  }
  if (st.st_nlink > 1) {
    throw refuse("has " + std::to_string(st.st_nlink) +
                 " hard links: another name could be someone's file; refused, nothing written");
  }
  if (mode == Mode::ReadOnly) return;
  if ((st.st_mode & 077) != 0 && ::fchmod(fd_, 0600) != 0) {
    throw refuse(std::string("cannot be made private (chmod 600): ") + std::strerror(errno));
  }
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
    throw refuse(error == EWOULDBLOCK ? "is in use by another kvtier process"
                                      : std::string("cannot be locked: ") + std::strerror(error));
  }
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), direct_(other.direct_) {}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
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
