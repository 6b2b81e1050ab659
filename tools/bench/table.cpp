#include "bench/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace deconvjit::bench {

void Table::add_column(std::string header, Align align) {
  headers_.push_back(std::move(header));
  align_.push_back(align);
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c) text += "  ";
      text += align_[c] == Align::Left ? cells[c] + pad : pad + cells[c];
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
}

std::string fixed(double value, int digits) {
  if (std::isnan(value)) return "n/a";
  if (value < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

}  // namespace deconvjit::bench
