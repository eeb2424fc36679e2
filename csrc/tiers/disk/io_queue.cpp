#include "kvtier/tiers/disk/io_queue.hpp"

#include <liburing.h>
#include <sys/uio.h>

#include <cstring>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::tiers::disk {

struct IoQueue::Ring {
  io_uring ring{};
};

IoQueue::IoQueue(unsigned depth) : ring_(std::make_unique<Ring>()), depth_(depth) {
  KVTIER_EXPECTS(depth > 0, "an I/O queue needs a depth of at least 1");
  const int status = io_uring_queue_init(2 * depth, &ring_->ring, 0);
  if (status < 0) throw ConfigError(std::string("io_uring is unavailable: ") + std::strerror(-status));
}

IoQueue::~IoQueue() {
  try {
    while (in_flight() > 0) wait();
  } catch (...) {  // a destructor never throws; the ring goes with the process's file table anyway
  }
  io_uring_queue_exit(&ring_->ring);
}

namespace {

/// Prepares one operation in a free submission entry with `prepare` and tags it.
template <class Prepare>
void queue_one(io_uring& ring, std::uint64_t tag, Prepare prepare) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  KVTIER_ASSERT(sqe != nullptr, "the submission ring is full below the queue depth");
  prepare(sqe);
  io_uring_sqe_set_data64(sqe, tag);
}

}  // namespace

bool IoQueue::read(int fd, std::span<std::byte> into, std::uint64_t offset, std::uint64_t tag) {
  if (full()) return false;
  queue_one(ring_->ring, tag, [&](io_uring_sqe* sqe) {
    io_uring_prep_read(sqe, fd, into.data(), static_cast<unsigned>(into.size()), offset);
  });
  ++queued_;
  return true;
}

bool IoQueue::write(int fd, std::span<const std::byte> from, std::uint64_t offset, std::uint64_t tag) {
  if (full()) return false;
  queue_one(ring_->ring, tag, [&](io_uring_sqe* sqe) {
    io_uring_prep_write(sqe, fd, from.data(), static_cast<unsigned>(from.size()), offset);
  });
  ++queued_;
  return true;
}

bool IoQueue::readv(int fd, std::span<const iovec> parts, std::uint64_t offset, std::uint64_t tag) {
  if (full()) return false;
  queue_one(ring_->ring, tag, [&](io_uring_sqe* sqe) {
    io_uring_prep_readv(sqe, fd, parts.data(), static_cast<unsigned>(parts.size()), offset);
  });
  ++queued_;
  return true;
}

bool IoQueue::writev(int fd, std::span<const iovec> parts, std::uint64_t offset, std::uint64_t tag) {
  if (full()) return false;
  queue_one(ring_->ring, tag, [&](io_uring_sqe* sqe) {
    io_uring_prep_writev(sqe, fd, parts.data(), static_cast<unsigned>(parts.size()), offset);
  });
  ++queued_;
  return true;
}

bool IoQueue::sync(int fd, std::uint64_t tag) {
  if (full()) return false;
  queue_one(ring_->ring, tag, [&](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC); });
  ++queued_;
  return true;
}

void IoQueue::submit() {
  if (queued_ == 0) return;
  const int status = io_uring_submit(&ring_->ring);
  if (status < 0) throw TransferError(std::string("io_uring_submit failed: ") + std::strerror(-status));
  submitted_ += static_cast<std::size_t>(status);
  queued_ -= static_cast<std::size_t>(status);
}

std::vector<IoQueue::Completion> IoQueue::reap() {
  submit();
  std::vector<Completion> out;
  io_uring_cqe* cqe = nullptr;
  while (submitted_ > 0 && io_uring_peek_cqe(&ring_->ring, &cqe) == 0) {
    out.push_back(Completion{.tag = io_uring_cqe_get_data64(cqe), .result = cqe->res});
    io_uring_cqe_seen(&ring_->ring, cqe);
    --submitted_;
  }
  return out;
}

std::vector<IoQueue::Completion> IoQueue::wait() {
  submit();
  if (submitted_ > 0) {
    io_uring_cqe* cqe = nullptr;
    const int status = io_uring_wait_cqe(&ring_->ring, &cqe);
    if (status < 0) throw TransferError(std::string("io_uring_wait_cqe failed: ") + std::strerror(-status));
  }
  return reap();
}

}  // namespace kvtier::tiers::disk
