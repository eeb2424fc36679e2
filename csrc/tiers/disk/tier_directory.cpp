#include "kvtier/tiers/disk/tier_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::disk {
namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

/// "dir/" names the link's target, "dir" the link: the last component is what O_NOFOLLOW checks.
std::filesystem::path without_trailing_separator(const std::filesystem::path& path) {
  std::filesystem::path normal = path.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path() && normal != normal.root_path()) {
    normal = normal.parent_path();
  }
  return normal;
}

}  // namespace

TierDirectory::TierDirectory(const std::filesystem::path& path, Access access)
    : path_(without_trailing_separator(path)) {
  const auto refuse = [&](const std::string& why) {
    return ConfigError("the disk tier's directory " + path_.string() + " " + why);
  };
  if (path_.empty()) throw ConfigError("the disk tier needs a directory");
  if (access == Access::Create) {
    std::error_code error;
    if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
    if (error) throw refuse("cannot be made: " + error.message());
    if (::mkdir(path_.c_str(), 0700) == 0) {
      created_ = true;
    } else if (errno != EEXIST) {
      throw refuse(std::string("cannot be made: ") + std::strerror(errno));
    }
  }
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    if (access == Access::Inspect && error == ENOENT) return;
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      throw refuse("is a symbolic link: kvtier never follows one there (give the directory it points to)");
    }
    throw refuse(std::string("cannot be opened: ") + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    ::close(fd_);
    throw refuse(std::string("cannot be examined: ") + std::strerror(error));
  }
  std::string why;
  if (st.st_uid != ::geteuid()) {
    why = "belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " + std::to_string(::geteuid()) +
          "): another user could replace the tier's file";
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    why = "is writable by group or others without the sticky bit (mode " + octal(st.st_mode) +
          "): anyone could replace the tier's file (chmod 700 it, or use a directory of your own)";
  }
  if (!why.empty()) {
    ::close(fd_);
    fd_ = -1;
    throw refuse(why);
  }
}

void TierDirectory::remove_if_created() noexcept {
  if (created_ && ::rmdir(path_.c_str()) == 0) created_ = false;
}

TierDirectory::~TierDirectory() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kvtier::tiers::disk
