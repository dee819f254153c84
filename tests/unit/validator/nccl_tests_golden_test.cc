// SPDX-License-Identifier: Apache-2.0
// Our results table against nccl-tests' own output: tables captured from nccl-tests v2.16.9 on
// the GPU machine (tests/fixtures/nccl-tests/, how in its README) are parsed back into sizes,
// timings and wrong elements, printed again by ResultTable, and compared line for line: the
// header and footer byte for byte, every row's columns at the same offsets with the same text,
// algbw and busbw within the rounding of the time nccl-tests printed (it divides by the unrounded
// time), the footer's average likewise.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/validator/collective.h"

namespace kuberdma::validator {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Whitespace-separated tokens with the offset each ends at.
std::vector<std::pair<std::string, size_t>> Tokens(const std::string& line) {
  std::vector<std::pair<std::string, size_t>> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.emplace_back(line.substr(start, i - start), i);
  }
  return out;
}

// Seconds that print as `text` in nccl-tests' time column (2 decimals below 100 us, 1 below
// 10 ms, none above): the printed value, kept inside the range its precision says it came from.
double SecondsOf(const std::string& text) {
  double us = std::stod(text);
  auto dot = text.find('.');
  int decimals = dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
  if (decimals == 2) us = std::min(us, 99.99);
  if (decimals == 1) us = std::clamp(us, 100.0, 9999.9);
  if (decimals == 0) us = std::max(us, 10000.0);
  return us / 1e6;
}

PlaceResult PlaceOf(const std::vector<std::pair<std::string, size_t>>& t, size_t at) {
  PlaceResult p{.seconds = SecondsOf(t[at].first)};
  if (t[at + 3].first == "N/A") {
    p.checked = false;
  } else {
    p.wrong = static_cast<uint64_t>(std::stod(t[at + 3].first));
  }
  return p;
}

struct Capture {
  std::string file;
  CollectiveSpec spec;
  int nranks = 0;
  std::vector<std::string> table;  // nccl-tests' lines, from the "#" before the header on
  std::vector<SizeResult> rows;
};

Capture Parse(const fs::path& path) {
  Capture c{.file = path.filename().string()};
  auto lines = Lines(*ReadFile(path.string()));
  std::string name = c.file.substr(0, c.file.find("_perf"));
  c.spec.kind = *ParseCollective(name);
  size_t begin = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("#  Rank ", 0) == 0) ++c.nranks;
    if (begin == 0 && lines[i].find("out-of-place") != std::string::npos) begin = i - 1;
  }
  for (size_t i = begin; i < lines.size(); ++i) {
    c.table.push_back(lines[i]);
    if (lines[i].rfind("# Avg bus bandwidth", 0) == 0) {
      c.table.push_back(lines[i + 1]);
      break;
    }
    if (lines[i].empty() || lines[i][0] == '#') continue;
    auto t = Tokens(lines[i]);
    c.spec.type = *ParseDataType(t[2].first);
    if (t[3].first != "none") c.spec.op = *ParseRedOp(t[3].first);
    c.spec.root = std::stoi(t[4].first) < 0 ? 0 : std::stoi(t[4].first);
    c.rows.push_back({.bytes = std::stoull(t[0].first),
                      .count = std::stoull(t[1].first),
                      .out_of_place = PlaceOf(t, 5),
                      .in_place = PlaceOf(t, 9)});
  }
  return c;
}

// Whether our bandwidth `a` is nccl-tests' `b` up to the rounding of the time it was derived
// from: nccl-tests divides by the time it measured, we by the time it printed (`time`, to 2, 1 or
// 0 decimals), so a 1.33 us row may differ by 0.4%.
bool Close(const std::string& a, const std::string& b, const std::string& time) {
  double x = std::stod(a);
  double y = std::stod(b);
  auto dot = time.find('.');
  double half_unit = 0.5 * std::pow(10.0, -(dot == std::string::npos
                                                ? 0.0
                                                : static_cast<double>(time.size() - dot - 1)));
  return std::fabs(x - y) <= 0.011 + std::fabs(y) * 1.01 * half_unit / std::stod(time);
}

TEST_CASE("Our table is nccl-tests v2.16.9's own, line for line, on its captured output") {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(std::string(KUBERDMA_FIXTURES) + "/nccl-tests")) {
    if (e.path().extension() == ".txt") files.push_back(e.path());
  }
  REQUIRE(files.size() >= 4);  // every capture in the README, none silently missing
  for (const auto& f : files) {
    Capture c = Parse(f);
    INFO(c.file);
    REQUIRE(c.nranks > 0);
    REQUIRE_FALSE(c.rows.empty());
    auto ours = Lines(ResultTable(c.spec, c.nranks, c.rows));
    REQUIRE(ours.size() == c.table.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO("line " << i << "\n  nccl-tests: [" << c.table[i] << "]\n  ours:       [" << ours[i]
                   << "]");
      if (c.table[i].rfind("# Avg bus bandwidth", 0) == 0) {
        CHECK(ours[i].substr(0, 25) == c.table[i].substr(0, 25));
        double ours_avg = std::stod(ours[i].substr(25));
        double theirs = std::stod(c.table[i].substr(25));
        CHECK(std::fabs(ours_avg - theirs) <= 0.011 + 0.005 * std::fabs(theirs));
        continue;
      }
      if (c.table[i].empty() || c.table[i][0] == '#') {
        CHECK(ours[i] == c.table[i]);
        continue;
      }
      auto want = Tokens(c.table[i]);
      auto got = Tokens(ours[i]);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        CHECK(got[k].second == want[k].second);  // the column ends where nccl-tests' does
        bool bandwidth = k == 6 || k == 7 || k == 10 || k == 11;
        if (bandwidth) {
          CHECK(Close(got[k].first, want[k].first, want[k < 9 ? 5 : 9].first));
        } else {
          CHECK(got[k].first == want[k].first);
        }
      }
    }
  }
}

}  // namespace
}  // namespace kuberdma::validator
