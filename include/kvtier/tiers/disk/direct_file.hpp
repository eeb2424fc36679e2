#pragma once
// The G3 tier's file: opened for direct I/O (O_DIRECT, no page cache) where
// the file system allows it, buffered where it refuses (tmpfs, overlayfs).
// Opened in its checked directory without following a link (O_NOFOLLOW), and
// only when it is a regular file of this user's with no other name: a tier
// never writes into a file someone pointed its name at.
#include <cstdint>
#include <filesystem>
#include <string>

#include "kvtier/tiers/disk/tier_directory.hpp"

namespace kvtier::tiers::disk {

class DirectFile {
 public:
  enum class Mode : bool {
    ReadWrite,  // created 0600 when missing, locked (flock) against a second writer
    ReadOnly    // never created, changed or locked; exists() is false when missing
  };
  /// Opens `name` in `directory`. ConfigError naming the file and the reason:
  /// a link, not a regular file, another user's, more than one hard link,
  /// cannot be opened, or (ReadWrite) another open file holds its lock
  /// (another process's tier). A file group or others could read is made
  /// 0600 (ReadWrite).
  DirectFile(const TierDirectory& directory, const std::string& name, Mode mode = Mode::ReadWrite);
  /// No file (exists() is false): a place to move one into.
  DirectFile() = default;
  /// Opens `path` for reading and writing in its existing directory (checked as above).
  explicit DirectFile(const std::filesystem::path& path);
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  ~DirectFile();

  int fd() const noexcept { return fd_; }
  bool exists() const noexcept { return fd_ >= 0; }
  const std::filesystem::path& path() const noexcept { return path_; }
  /// O_DIRECT: every offset, length and buffer address must be a multiple of
  /// kRecordAlignment. false: the file system refused it; I/O is buffered.
  bool direct() const noexcept { return direct_; }
  std::uint64_t size() const;
  /// Grows or shrinks the file to `bytes` (ConfigError when the disk refuses).
  void resize(std::uint64_t bytes);

 private:
  void open_in(const TierDirectory& directory, const std::string& name, Mode mode);

  std::filesystem::path path_;
  int fd_ = -1;
  bool direct_ = false;
};

}  // namespace kvtier::tiers::disk
