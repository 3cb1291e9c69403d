// The name a client gives the service (client/process_name.hpp): the program's whole name when
// the kernel cut its comm, the comm a program chose itself otherwise, always valid UTF-8 within
// the service's bound.
#include "client/process_name.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/utf8.hpp"
#include "wire/framing.hpp"

namespace gf::client {
namespace {

std::string first15(const std::string &s) {
  return s.substr(0, 15);
}

TEST(ProcessName, ACommTheKernelCutGivesWayToTheWholeProgramName) {
  EXPECT_EQ(process_name_of(first15("训练任务_模型"), "训练任务_模型"), "训练任务_模型");
  EXPECT_EQ(process_name_of(first15("entraîné_modèle"), "entraîné_modèle"), "entraîné_modèle");
  EXPECT_EQ(process_name_of(first15("a_rather_long_program"), "a_rather_long_program"),
            "a_rather_long_program");
}

TEST(ProcessName, ACommTheProgramChoseIsKept) {
  EXPECT_EQ(process_name_of("worker-3", "python3"), "worker-3");
  EXPECT_EQ(process_name_of("python3", "python3"), "python3");
  // Chosen (prctl) and cut by the kernel mid-character: the whole characters stay.
  EXPECT_EQ(process_name_of(first15("训练任务_模型"), "python3"), "训练任务_");
}

TEST(ProcessName, BytesThatAreNotUtf8AreReplaced) {
  EXPECT_EQ(process_name_of("\xff\xfe"
                            "abc",
                            "prog"),
            "\xef\xbf\xbd\xef\xbf\xbd"
            "abc");
  EXPECT_EQ(process_name_of("",
                            "\xff"
                            "x"),
            "\xef\xbf\xbd"
            "x");
}

TEST(ProcessName, EmptyNamesGetADefault) {
  EXPECT_EQ(process_name_of("", ""), "gpuflow client");
}

TEST(ProcessName, TheResultFitsTheServicesBound) {
  const std::string program(1000, 'p');
  const std::string name = process_name_of(first15(program), program);
  EXPECT_LE(name.size(), wire::kMaxHelloName);
  EXPECT_EQ(utf8_error_at(name), std::string_view::npos);
}

TEST(ProcessName, ThisProcessHasOne) {
  const std::string name = process_name();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(utf8_error_at(name), std::string_view::npos);
}

}  // namespace
}  // namespace gf::client
