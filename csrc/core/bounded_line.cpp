#include "kvtier/core/bounded_line.hpp"

#include <array>

namespace kvtier {

LineRead read_bounded_line(std::istream& in, std::string& line, std::size_t max_bytes) {
  line.clear();
  bool read_any = false;
  std::array<char, 4096> chunk{};
  for (;;) {
    // get(buffer, n) reads at most n - 1 characters, stops before '\n' and sets
    // failbit when it stored none; one past `room` tells a line that is too long.
    const std::size_t room = max_bytes - line.size();
    const auto want = static_cast<std::streamsize>(room < chunk.size() - 1 ? room + 2 : chunk.size());
    in.get(chunk.data(), want, '\n');
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got > room) {
      line.append(chunk.data(), room);
      return LineRead::TooLong;
    }
    line.append(chunk.data(), got);
    read_any = read_any || got > 0;
    if (in.bad()) return LineRead::End;
    if (in.eof()) return read_any ? LineRead::Line : LineRead::End;
    if (in.fail()) in.clear(in.rdstate() & ~std::ios::failbit);  // an empty stretch before '\n'
    const int next = in.peek();
    if (next == '\n') {
      in.ignore();
      return LineRead::Line;
    }
    if (next == std::char_traits<char>::eof()) return read_any ? LineRead::Line : LineRead::End;
  }
}

}  // namespace kvtier
