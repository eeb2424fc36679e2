#pragma once
// The G3 tier's file: opened for direct I/O (O_DIRECT, no page cache) where
// the file system allows it, buffered where it refuses (tmpfs, overlayfs).
#include <cstdint>
#include <filesystem>

namespace kvtier::tiers::disk {

class DirectFile {
 public:
  /// Opens `path` for reading and writing, creating it, and locks it
  /// (flock): ConfigError if it cannot be opened at all or another open
  /// file holds it (another process's tier).
  explicit DirectFile(const std::filesystem::path& path);
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  ~DirectFile();

  int fd() const noexcept { return fd_; }
  /// O_DIRECT: every offset, length and buffer address must be a multiple of
  /// kRecordAlignment. false: the file system refused it; I/O is buffered.
  bool direct() const noexcept { return direct_; }
  std::uint64_t size() const;
  /// Grows or shrinks the file to `bytes` (ConfigError when the disk refuses).
  void resize(std::uint64_t bytes);

 private:
  int fd_ = -1;
  bool direct_ = false;
};

}  // namespace kvtier::tiers::disk
