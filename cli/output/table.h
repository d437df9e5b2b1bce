#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace rxfleet::cli {

/// Number of terminal columns `text` takes: UTF-8 code points, so "32µs" is 4 wide although
/// it is 5 bytes. (Every character rxfleetctl prints is one column wide.)
size_t DisplayWidth(std::string_view text);

/// A plain-text table in the kubectl style: an upper-case header row, columns left-aligned and
/// separated by three spaces, padded by display width, no trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);

  /// Adds a row; missing cells print empty, extra cells are a programming error (ignored).
  void AddRow(std::vector<std::string> cells);

  /// Number of rows without the header.
  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }

  /// Prints the header and the rows in insertion order, each line prefixed by `indent`.
  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace rxfleet::cli
