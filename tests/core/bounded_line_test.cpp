// read_bounded_line: std::getline's lines, and a clear end for a line too long
// to hold (issue 23: a trace of /dev/zero grew past 4 GB).
#include "kvtier/core/bounded_line.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "kvtier/core/checked_arithmetic.hpp"

namespace kvtier {
namespace {

std::vector<std::string> lines_of(const std::string& text, std::size_t max_bytes) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string line;
  for (LineRead read; (read = read_bounded_line(in, line, max_bytes)) != LineRead::End;) {
    out.push_back(read == LineRead::TooLong ? "<too long>" : line);
    if (read == LineRead::TooLong) break;
  }
  return out;
}

TEST(BoundedLine, GivesTheLinesGetlineGives) {
  for (const std::string& text :
       std::vector<std::string>{"", "a", "a\n", "a\nb", "a\n\nb\n", "\n", "\n\n", "abc\r\nde\n",
                                std::string(10000, 'x') + "\n" + std::string(5000, 'y')}) {
    std::istringstream in(text);
    std::vector<std::string> expected;
    for (std::string line; std::getline(in, line);) expected.push_back(line);
    EXPECT_EQ(lines_of(text, 1 << 20), expected) << text.substr(0, 20);
  }
}

TEST(BoundedLine, ALineOverTheBoundIsTooLongAndAtTheBoundIsNot) {
  EXPECT_EQ(lines_of("abcd\nef\n", 4), (std::vector<std::string>{"abcd", "ef"}));
  EXPECT_EQ(lines_of("abcd", 4), (std::vector<std::string>{"abcd"}));
  EXPECT_EQ(lines_of("ab\nabcde\nx\n", 4), (std::vector<std::string>{"ab", "<too long>"}));
  EXPECT_EQ(lines_of(std::string(9000, 'z'), 8192), (std::vector<std::string>{"<too long>"}));
  std::istringstream in(std::string(100, 'q'));
  std::string line;
  EXPECT_EQ(read_bounded_line(in, line, 10), LineRead::TooLong);
  EXPECT_EQ(line.size(), 10U) << "holds no more than the bound";
}

TEST(CheckedArithmetic, OverflowIsAnAnswerNotAWrap) {
  EXPECT_EQ(checked_add<std::size_t>(2, 3), 5U);
  EXPECT_FALSE(checked_add<std::size_t>(SIZE_MAX, 1));
  EXPECT_FALSE(checked_add<std::size_t>(10, SIZE_MAX - 5));
  EXPECT_EQ(checked_mul<std::uint32_t>(65536, 65535), 65536U * 65535U);
  EXPECT_FALSE(checked_mul<std::uint32_t>(65536, 65536));
}

}  // namespace
}  // namespace kvtier
