#pragma once
// Asynchronous reads and writes through io_uring (liburing): a bounded queue
// depth, submissions batched into one system call, completions reaped
// without blocking the scheduler that polls them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

struct iovec;

namespace kvtier::tiers::disk {

class IoQueue {
 public:
  struct Completion {
    std::uint64_t tag = 0;
    std::int64_t result = 0;  // bytes moved, or -errno
  };

  /// At most `depth` operations in flight (the ring holds twice as many).
  /// ConfigError when io_uring is
  /// unavailable (a kernel without it, a seccomp filter that forbids it).
  explicit IoQueue(unsigned depth);
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;
  /// Waits for the operations in flight: their buffers are the caller's.
  ~IoQueue();

  unsigned depth() const noexcept { return depth_; }
  std::size_t in_flight() const noexcept { return queued_ + submitted_; }
  bool full() const noexcept { return in_flight() >= depth_; }

  /// Queues a read of `into.size()` bytes at `offset` of `fd`; false (nothing
  /// queued) when `depth` operations are in flight. The buffer must stay
  /// valid until its completion was reaped.
  bool read(int fd, std::span<std::byte> into, std::uint64_t offset, std::uint64_t tag);
  /// Queues a write, as read.
  bool write(int fd, std::span<const std::byte> from, std::uint64_t offset, std::uint64_t tag);
  /// Queues one read (write) of consecutive bytes at `offset` into (from) the
  /// buffers `parts` names in order: a record's header and a caller's page
  /// in one I/O. `parts` and its buffers must stay valid until the completion
  /// was reaped; as read otherwise.
  bool readv(int fd, std::span<const iovec> parts, std::uint64_t offset, std::uint64_t tag);
  bool writev(int fd, std::span<const iovec> parts, std::uint64_t offset, std::uint64_t tag);
  /// Queues an fdatasync of `fd`: it covers the writes that completed before
  /// it was submitted (result 0, or -errno), as read.
  bool sync(int fd, std::uint64_t tag);
  /// Submits what was queued since the last submit (one system call).
  void submit();
  /// The completions that arrived, without blocking (submits first).
  std::vector<Completion> reap();
  /// Waits until at least one completion arrived when any operation is in
  /// flight, then reaps (submits first).
  std::vector<Completion> wait();

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
  unsigned depth_;
  std::size_t queued_ = 0;     // prepared, not submitted
  std::size_t submitted_ = 0;  // submitted, not reaped
};

}  // namespace kvtier::tiers::disk
