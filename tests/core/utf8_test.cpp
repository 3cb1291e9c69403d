// UTF-8 for names gpuflow takes as they come (core/utf8.hpp): repaired, cut at a character
// boundary, abbreviated.
#include "core/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gf {
namespace {

const std::string kFffd = "\xef\xbf\xbd";  // U+FFFD

TEST(Utf8, ErrorAtFindsTheFirstIllFormedByte) {
  EXPECT_EQ(utf8_error_at("plain"), std::string_view::npos);
  EXPECT_EQ(utf8_error_at("训练任务_模型"), std::string_view::npos);
  EXPECT_EQ(utf8_error_at("ab\xff"), 2u);
  EXPECT_EQ(utf8_error_at("a\xc0\x80"), 1u);                             // overlong NUL
  EXPECT_EQ(utf8_error_at("a\xe0\x80\x80"), 1u);                         // overlong three-byte form
  EXPECT_EQ(utf8_error_at("\xed\xa0\x80"), 0u);                          // a surrogate, U+D800
  EXPECT_EQ(utf8_error_at("\xf4\x90\x80\x80"), 0u);                      // above U+10FFFF
  EXPECT_EQ(utf8_error_at("x\xe6\xa8"), 1u);                             // cut short
  EXPECT_EQ(utf8_error_at("\xf0\x9f\x98\x80"), std::string_view::npos);  // U+1F600
}

TEST(Utf8, StepGivesCodePointsAndMaximalIllFormedParts) {
  Utf8Step s = utf8_step("\xc3\xa9", 0);
  EXPECT_TRUE(s.valid);
  EXPECT_EQ(s.length, 2u);
  EXPECT_EQ(s.code_point, 0xe9u);
  s = utf8_step("\xe6\xa8\x21", 0);  // a lead byte and one continuation, then '!'
  EXPECT_FALSE(s.valid);
  EXPECT_FALSE(s.cut_short);
  EXPECT_EQ(s.length, 2u);
  s = utf8_step("\xe6\xa8", 0);
  EXPECT_FALSE(s.valid);
  EXPECT_TRUE(s.cut_short);
  EXPECT_EQ(s.length, 2u);
  s = utf8_step("\x80", 0);
  EXPECT_FALSE(s.valid);
  EXPECT_EQ(s.length, 1u);
}

TEST(Utf8, RepairedReplacesIllFormedPartsAndDropsACutEnd) {
  EXPECT_EQ(utf8_repaired("entraîné"), "entraîné");
  EXPECT_EQ(utf8_repaired("a\xff"
                          "b"),
            "a" + kFffd + "b");
  // One replacement per maximal part: the lead byte with the continuation that fits.
  EXPECT_EQ(utf8_repaired("a\xe6\xa8!"), "a" + kFffd + "!");
  EXPECT_EQ(utf8_repaired("\xff\xfe"), kFffd + kFffd);
  EXPECT_EQ(utf8_repaired("\xed\xa0\x80"), kFffd + kFffd + kFffd);  // a surrogate: 3 parts
  // What the kernel leaves of `训练任务_模型` in /proc/self/comm: 15 bytes, the last character
  // cut after two of its three bytes. The piece goes; nothing replaces it.
  const std::string comm = std::string("训练任务_模型").substr(0, 15);
  EXPECT_EQ(utf8_repaired(comm), "训练任务_");
  EXPECT_EQ(utf8_repaired(std::string("entraîné_modèle").substr(0, 15)), "entraîné_mod");
  EXPECT_EQ(utf8_error_at(utf8_repaired(std::string("\xc3\x28\xa0\xa1\xf0\x28\x8c\xbc"))),
            std::string_view::npos);
}

TEST(Utf8, PrefixEndsAtACharacterBoundary) {
  const std::string name = "训练任务";  // 3 bytes each
  EXPECT_EQ(utf8_prefix(name, 12), name);
  EXPECT_EQ(utf8_prefix(name, 100), name);
  EXPECT_EQ(utf8_prefix(name, 11), "训练任");
  EXPECT_EQ(utf8_prefix(name, 9), "训练任");
  EXPECT_EQ(utf8_prefix(name, 2), "");
  EXPECT_EQ(utf8_prefix("abc", 0), "");
}

TEST(Utf8, FittedIsValidAndWithinTheBoundWhateverComesIn) {
  EXPECT_EQ(utf8_fitted("训练任务_模型", 14), "训练任务_");
  EXPECT_EQ(utf8_fitted("\xff"
                        "abc",
                        4),
            kFffd + "a");
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::string bytes;
    unsigned x = seed;
    for (int i = 0; i < 40; ++i) {
      x = x * 1103515245u + 12345u;
      bytes += static_cast<char>(x >> 16);
    }
    for (size_t bound : {0u, 1u, 5u, 16u, 300u}) {
      const std::string fitted = utf8_fitted(bytes, bound);
      EXPECT_LE(fitted.size(), bound);
      EXPECT_EQ(utf8_error_at(fitted), std::string_view::npos) << seed << " " << bound;
    }
  }
}

TEST(Utf8, AbbreviatedMarksWhatWasCut) {
  EXPECT_EQ(utf8_abbreviated("short", 10), "short");
  EXPECT_EQ(utf8_abbreviated("0123456789", 10), "0123456789");
  EXPECT_EQ(utf8_abbreviated("0123456789a", 10), "0123456…");
  // "…" is 3 bytes: 7 bytes are left for the name, two whole characters of 3 bytes.
  EXPECT_EQ(utf8_abbreviated("训练任务_模型", 10), "训练…");
  EXPECT_LE(utf8_abbreviated(std::string(4096, 'x'), 256).size(), 256u);
}

}  // namespace
}  // namespace gf
