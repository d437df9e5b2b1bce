// Runs common/chips/generate_chip_table.cmake on small TSVs: good rows become table entries,
// malformed rows fail with the file and line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/fixture_path.h"

namespace rxfleet::common {
namespace {

using ::testing::HasSubstr;

constexpr char kHeader[] = "vid\tpid\tchip\trx_agg_layout\tsource\n";

class GenerateChipTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rxfleet-chip-table-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs the generator on `tsv`; returns the exit status, fills output (stdout+stderr).
  int Run(const std::string& tsv, std::string* output) {
    const std::filesystem::path input = dir_ / "in.tsv";
    {
      std::ofstream out(input, std::ios::binary);
      out << tsv;
    }
    const std::filesystem::path log = dir_ / "log.txt";
    const std::string command = std::string("'") + RXFLEET_CMAKE_COMMAND + "' -DINPUT='" +
                                input.string() + "' -DOUTPUT='" + Generated().string() + "' -P '" +
                                RXFLEET_CHIP_TABLE_SCRIPT + "' > '" + log.string() + "' 2>&1";
    const int status = std::system(command.c_str());
    // CMake wraps messages at ~80 columns: compare with whitespace runs folded to one space.
    output->clear();
    for (char c : testing::ReadFile(log.string())) {
      const bool space = c == ' ' || c == '\n' || c == '\t';
      if (space && !output->empty() && output->back() == ' ') continue;
      output->push_back(space ? ' ' : c);
    }
    return status;
  }

  std::filesystem::path Generated() const { return dir_ / "out.cc"; }

  std::filesystem::path dir_;
};

TEST_F(GenerateChipTableTest, GoodRowsBecomeEntries) {
  std::string output;
  ASSERT_EQ(Run(std::string(kHeader) + "0BDA\t8912\trtl8922au\tv3\tx\n0bda\tb851\trtl8851bu\tv1\n",
                &output),
            0)
      << output;
  const std::string cc = testing::ReadFile(Generated().string());
  EXPECT_THAT(cc, HasSubstr("{0x0bda, 0x8912, \"rtl8922au\", RxAggLayout::kV3},"));
  EXPECT_THAT(cc, HasSubstr("{0x0bda, 0xb851, \"rtl8851bu\", RxAggLayout::kV1},"));
  EXPECT_THAT(cc, HasSubstr("do not edit"));
}

TEST_F(GenerateChipTableTest, MalformedRowsFailWithLine) {
  struct Case {
    std::string rows;
    std::string message;
  };
  const Case cases[] = {
      {"0bda\t891\trtl8922au\tv3\n", "in.tsv:2: pid '891' is not 4 hex digits"},
      {"0bda\t8912\trtl8922au\tv4\n", "in.tsv:2: rx_agg_layout 'v4' must be v1, v2 or v3"},
      {"0bda\t8912\tRTL8922AU\tv3\n", "in.tsv:2: chip 'RTL8922AU' must be [a-z0-9]+"},
      {"0bda\t8912\trtl8922au\n", "in.tsv:2: expected at least 4 tab-separated columns"},
      {"0bda\t8912\trtl8922au\tv3\n0bda\t8912\trtl8922au\tv3\n",
       "in.tsv:3: duplicate ID 0bda:8912"},
  };
  for (const Case& c : cases) {
    std::string output;
    EXPECT_NE(Run(std::string(kHeader) + c.rows, &output), 0) << c.rows;
    EXPECT_THAT(output, HasSubstr(c.message)) << c.rows;
  }
  std::string output;
  EXPECT_NE(Run("vid,pid\n0bda,8912\n", &output), 0);
  EXPECT_THAT(output, HasSubstr("header must start with vid, pid, chip, rx_agg_layout"));
}

}  // namespace
}  // namespace rxfleet::common
