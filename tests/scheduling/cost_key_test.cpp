// Cost keys: the default a task name gives (as Dask's key_split) and what a key may be.
#include <gtest/gtest.h>

#include <string>

#include "graph/cost_key.hpp"

namespace gf {
namespace {

TEST(CostKey, NamePrefixUpToTheFirstDigitOrSeparator) {
  EXPECT_EQ(cost_key_prefix("inc-123"), "inc");
  EXPECT_EQ(cost_key_prefix("('sum-abc', 0)"), "sum");
  EXPECT_EQ(cost_key_prefix("(\"sum-abc\", 0)"), "sum");
  EXPECT_EQ(cost_key_prefix("chunk_3_4"), "chunk");
  EXPECT_EQ(cost_key_prefix("x"), "x");
  EXPECT_EQ(cost_key_prefix("finalize"), "finalize");
  EXPECT_EQ(cost_key_prefix("add7"), "add");
  EXPECT_EQ(cost_key_prefix("mod.fn-1"), "mod");
  EXPECT_EQ(cost_key_prefix("_private-2"), "private");
  EXPECT_EQ(cost_key_prefix("[ 'tuple', 1 ]"), "tuple");
  EXPECT_EQ(cost_key_prefix("h\xc3\xa9llo-1"), "h\xc3\xa9llo");  // UTF-8 letters stay
}

TEST(CostKey, NamesWithoutAPrefixGiveNone) {
  EXPECT_EQ(cost_key_prefix(""), "");
  EXPECT_EQ(cost_key_prefix("123"), "");
  EXPECT_EQ(cost_key_prefix("-x"), "");
  EXPECT_EQ(cost_key_prefix("('"), "");
  EXPECT_EQ(cost_key_prefix("(7, 'x')"), "");
}

TEST(CostKey, ValidKeys) {
  EXPECT_TRUE(valid_cost_key("inc"));
  EXPECT_TRUE(valid_cost_key("my_module.Class.method"));
  EXPECT_TRUE(valid_cost_key("with spaces and 'quotes' (0)"));
  EXPECT_TRUE(valid_cost_key("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"));  // é € 🚀
  EXPECT_TRUE(valid_cost_key(std::string(kMaxCostKey, 'k')));
}

TEST(CostKey, InvalidKeys) {
  EXPECT_FALSE(valid_cost_key(""));
  EXPECT_FALSE(valid_cost_key(std::string(kMaxCostKey + 1, 'k')));
  EXPECT_FALSE(valid_cost_key("tab\there"));
  EXPECT_FALSE(valid_cost_key("new\nline"));
  EXPECT_FALSE(valid_cost_key("del\x7f"));
  EXPECT_FALSE(valid_cost_key(std::string("nul\0x", 5)));
  EXPECT_FALSE(valid_cost_key("\xff"));              // not UTF-8
  EXPECT_FALSE(valid_cost_key("\xc3"));              // truncated sequence
  EXPECT_FALSE(valid_cost_key("\xc0\xaf"));          // overlong
  EXPECT_FALSE(valid_cost_key("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(valid_cost_key("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_cost_key("\xc2\x85"));          // C1 control (NEL)
}

}  // namespace
}  // namespace gf
