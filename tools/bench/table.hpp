// A text table whose columns line up however long the cells turn out (kernel names vary a lot), and the
// number formatting `bench` and `peak` share.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace deconvjit::bench {

class Table {
 public:
  enum class Align { Left, Right };
  void add_column(std::string header, Align align = Align::Right);
  void add_row(std::vector<std::string> cells);  // one cell per column; missing cells print empty
  void print(std::ostream& out) const;           // two spaces between columns, no trailing blanks
  const std::vector<std::string>& headers() const { return headers_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// `value` with `digits` after the decimal point; "-" for a negative value (the convention for "not
// measured") and "n/a" for NaN (measured, but impossible).
std::string fixed(double value, int digits);

}  // namespace deconvjit::bench
