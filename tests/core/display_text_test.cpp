// Names on their way to a terminal or a log (core/display_text.hpp): nothing a user chose acts
// on the reader's terminal, printable text passes as it is.
#include "core/display_text.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/json_text.hpp"

namespace gf {
namespace {

// No byte a terminal acts on: C0 controls, DEL, C1 controls (as UTF-8 or as lone bytes).
bool inert(const std::string &s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0) return false;
  }
  return utf8_error_at(s) == std::string_view::npos;
}

TEST(DisplayText, PrintableTextPassesAsItIs) {
  EXPECT_EQ(escaped_for_display("train.py --lr 0.1"), "train.py --lr 0.1");
  EXPECT_EQ(escaped_for_display("训练任务_模型"), "训练任务_模型");
  EXPECT_EQ(escaped_for_display("entraîné_modèle"), "entraîné_modèle");
  EXPECT_EQ(escaped_for_display(""), "");
}

TEST(DisplayText, ControlCharactersBecomeVisibleEscapes) {
  EXPECT_EQ(escaped_for_display("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(escaped_for_display("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
  EXPECT_EQ(escaped_for_display("a\rb\nc\td"), "a\\rb\\nc\\td");
  EXPECT_EQ(escaped_for_display(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escaped_for_display("del\x7f"), "del\\x7f");
  EXPECT_EQ(escaped_for_display("\xc2\x9b"
                                "31m"),
            "\\u009b31m");  // C1 CSI as UTF-8
}

TEST(DisplayText, BidirectionalControlsAndSeparatorsAreEscaped) {
  EXPECT_EQ(escaped_for_display("a\xe2\x80\xae"
                                "cba"),
            "a\\u202ecba");                                     // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(escaped_for_display("\xe2\x81\xa6x"), "\\u2066x");  // LEFT-TO-RIGHT ISOLATE
  EXPECT_EQ(escaped_for_display("\xe2\x80\xa8"), "\\u2028");    // LINE SEPARATOR
}

TEST(DisplayText, BytesThatAreNotUtf8AreEscapedOneByOne) {
  EXPECT_EQ(escaped_for_display("a\xff\xfe"), "a\\xff\\xfe");
  EXPECT_EQ(escaped_for_display("\x9b"
                                "31m"),
            "\\x9b31m");  // a lone C1 byte
  EXPECT_EQ(escaped_for_display(std::string("训练任务_模型").substr(0, 15)), "训练任务_\\xe6\\xa8");
}

TEST(DisplayText, BackslashIsEscapedSoEscapesAreUnambiguous) {
  EXPECT_EQ(escaped_for_display("\\x1b"), "\\\\x1b");
  EXPECT_NE(escaped_for_display("\\x1b"), escaped_for_display("\x1b"));
}

TEST(DisplayText, NoOutputByteActsOnATerminal) {
  for (unsigned seed = 1; seed <= 300; ++seed) {
    std::string bytes;
    unsigned x = seed;
    for (int i = 0; i < 48; ++i) {
      x = x * 1103515245u + 12345u;
      bytes += static_cast<char>(x >> 16);
    }
    EXPECT_TRUE(inert(escaped_for_display(bytes))) << seed;
  }
}

TEST(DisplayText, JsonEscapesTheSameControls) {
  EXPECT_EQ(json_quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quoted("\x1b[2J\n"), "\"\\u001b[2J\\u000a\"");
  EXPECT_EQ(json_quoted("\xc2\x9b"
                        "x\xe2\x80\xae"),
            "\"\\u009bx\\u202e\"");
  EXPECT_EQ(json_quoted("训练任务"), "\"训练任务\"");
}

}  // namespace
}  // namespace gf
