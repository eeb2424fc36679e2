#pragma once
// The directory a G3 tier lives in, opened once and used through openat:
// nothing in it is reached by a path another user could swap for a link.
// A directory kvtier creates is 0700; an existing one is refused when it is
// a link, another user's, or writable by group or others without the sticky
// bit (where anyone could plant a file under the tier's name).
#include <filesystem>

namespace kvtier::tiers::disk {

class TierDirectory {
 public:
  enum class Access : bool {
    Create,  // made (0700, missing parents too) when missing: a tier that writes
    Inspect  // must exist; nothing is made or changed (kvtier info)
  };
  /// ConfigError naming the path and the reason when it cannot be used.
  TierDirectory(const std::filesystem::path& path, Access access);
  TierDirectory(const TierDirectory&) = delete;
  TierDirectory& operator=(const TierDirectory&) = delete;
  ~TierDirectory();

  int fd() const noexcept { return fd_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  /// False when Inspect found no directory there.
  bool exists() const noexcept { return fd_ >= 0; }
  /// True when this object made it (Create found none).
  bool created() const noexcept { return created_; }
  /// Removes it again when this object made it and it is empty (a refused tier leaves nothing behind).
  void remove_if_created() noexcept;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool created_ = false;
};

}  // namespace kvtier::tiers::disk
