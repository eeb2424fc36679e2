#pragma once
// Reading text input one line at a time with a bound, so a file without
// newlines (or /dev/zero) ends in a clear error instead of unbounded memory.
#include <cstddef>
#include <istream>
#include <string>

namespace kvtier {

/// The longest line kvtier's readers (traces, operation scripts) accept: 64 MiB.
inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;

enum class LineRead : unsigned char {
  Line,     ///< `line` holds the next line, without its '\n'
  End,      ///< no more input
  TooLong,  ///< the line has more than `max_bytes` bytes; `line` holds its first `max_bytes`
};

/// std::getline with a bound: never holds more than `max_bytes` of one line.
/// A read error sets the stream's badbit, as std::getline does.
LineRead read_bounded_line(std::istream& in, std::string& line, std::size_t max_bytes = kMaxLineBytes);

}  // namespace kvtier
