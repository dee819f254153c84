// SPDX-License-Identifier: Apache-2.0
// Collectives as nccl-tests defines them: bus factors, buffer shapes, sweeps, and the expected
// results, checked against a brute-force reference that applies each collective's definition to
// every rank's send buffer.
#include "kuberdma/validator/collective.h"

#include <catch2/catch.hpp>
#include <cstdint>

#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {
namespace {

TEST_CASE("Bus bandwidth factors are nccl-tests'") {
  CHECK(BusFactor(Collective::kAllReduce, 8) == Approx(1.75));
  for (auto c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll}) {
    CHECK(BusFactor(c, 8) == Approx(0.875));
  }
  for (auto c : {Collective::kBroadcast, Collective::kReduce, Collective::kSendRecv}) {
    CHECK(BusFactor(c, 8) == Approx(1.0));
  }
  CHECK(BusFactor(Collective::kAllReduce, 2) == Approx(1.0));
  CHECK(AllCollectives().size() == 7);
  for (auto c : AllCollectives()) CHECK(*ParseCollective(Name(c)) == c);
}

TEST_CASE("The size column means each collective's buffer, as in nccl-tests") {
  const size_t mib128 = 128u << 20;
  auto ag = ShapeOf({.kind = Collective::kAllGather}, mib128, 8);
  CHECK(ag.send == mib128 / 4 / 8);  // each rank contributes an eighth
  CHECK(ag.recv == mib128 / 4);
  CHECK(ag.bytes == mib128);
  auto rs = ShapeOf({.kind = Collective::kReduceScatter}, mib128, 8);
  CHECK(rs.send == mib128 / 4);
  CHECK(rs.recv == mib128 / 4 / 8);
  auto a2a = ShapeOf({.kind = Collective::kAllToAll, .type = DataType::kBfloat16}, 1000, 3);
  CHECK(a2a.send == 498);  // 500 elements, rounded down to three equal pieces
  CHECK(a2a.bytes == 996);
  CHECK_FALSE(a2a.in_place_checked);  // timed in place, as nccl-tests does, but not checked
  CHECK_FALSE(ShapeOf({.kind = Collective::kSendRecv}, 1024, 2).in_place_checked);
  CHECK(ShapeOf({.kind = Collective::kAllGather}, 1024, 2).in_place_checked);
  CHECK(ShapeOf({.kind = Collective::kBroadcast, .type = DataType::kFloat64}, 1024, 4).count ==
        128);
}

TEST_CASE("Sweeps follow -b/-e with -f or -i, bad sweeps are refused") {
  auto seed =
      SweepSizes(128u << 20, size_t{8} << 30, 2, 0);  // nccl-tests' common -b 128M -e 8G -f 2
  REQUIRE(seed);
  CHECK(seed->size() == 7);
  CHECK(seed->front() == (128u << 20));
  CHECK(seed->back() == (size_t{8} << 30));
  CHECK(*SweepSizes(1000, 4000, 0, 1000) == std::vector<size_t>{1000, 2000, 3000, 4000});
  CHECK(*SweepSizes(64, 64, 1, 0) == std::vector<size_t>{64});
  CHECK_FALSE(SweepSizes(0, 64, 2, 0));
  CHECK_FALSE(SweepSizes(64, 32, 2, 0));
  CHECK_FALSE(SweepSizes(64, 128, 1, 0));
  CHECK_FALSE(SweepSizes(1, size_t{1} << 40, 0, 1));  // over 1000 sizes
}

TEST_CASE("What cannot run is refused: avg of integers, a root that is not a rank") {
  CHECK_FALSE(
      Check({.kind = Collective::kAllReduce, .type = DataType::kInt32, .op = RedOp::kAvg}, 4));
  CHECK(Check({.kind = Collective::kAllReduce, .type = DataType::kFloat16, .op = RedOp::kAvg}, 4));
  CHECK_FALSE(Check({.kind = Collective::kBroadcast, .root = 4}, 4));
  CHECK(Check({.kind = Collective::kAllGather, .root = 9}, 4));  // no root to check
  CHECK_FALSE(ParseDataType("float8"));
  CHECK(*ParseDataType("bf16") == DataType::kBfloat16);
  CHECK_FALSE(ParseRedOp("xor"));
}

// The value `v` as the type holds it: integers wrap like the GPU's arithmetic.
double AsType(DataType t, double v) {
  auto i = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8:
      return static_cast<int8_t>(static_cast<uint8_t>(i));
    case DataType::kUint8:
      return static_cast<uint8_t>(i);
    case DataType::kInt32:
      return static_cast<int32_t>(static_cast<uint32_t>(i));
    case DataType::kUint32:
      return static_cast<uint32_t>(i);
    default:
      return v;
  }
}

// Brute force: the definition of each collective over every rank's send buffer.
std::optional<double> Reference(const CollectiveSpec& s, const Shape& sh, int n, int r, size_t i) {
  auto reduce = [&](size_t at) {
    double acc = SendValue(s, 0, at);
    for (int k = 1; k < n; ++k) {
      double v = SendValue(s, k, at);
      switch (s.op) {
        case RedOp::kSum:
        case RedOp::kAvg:
          acc += v;
          break;
        case RedOp::kProd:
          acc *= v;
          break;
        case RedOp::kMax:
          acc = std::max(acc, v);
          break;
        case RedOp::kMin:
          acc = std::min(acc, v);
          break;
      }
    }
    return s.op == RedOp::kAvg ? acc / n : AsType(s.type, acc);
  };
  auto un = static_cast<size_t>(n);
  switch (s.kind) {
    case Collective::kAllReduce:
      return reduce(i);
    case Collective::kReduce:
      return r == s.root ? std::optional<double>(reduce(i)) : std::nullopt;
    case Collective::kReduceScatter:
      return reduce(static_cast<size_t>(r) * sh.recv + i);
    case Collective::kBroadcast:
      return SendValue(s, s.root, i);
    case Collective::kAllGather: {
      int from = static_cast<int>(i / sh.send);
      return SendValue(s, from, i % sh.send);
    }
    case Collective::kAllToAll: {
      size_t piece = sh.send / un;
      int from = static_cast<int>(i / piece);
      return SendValue(s, from, static_cast<size_t>(r) * piece + i % piece);
    }
    case Collective::kSendRecv:
      return SendValue(s, (r + n - 1) % n, i);
  }
  return std::nullopt;
}

TEST_CASE("Expected results agree with each collective's definition, every type and op") {
  int checked = 0;
  for (auto c : AllCollectives()) {
    for (auto t : {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kFloat16,
                   DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
      for (auto op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
        if (!IsReduction(c) && op != RedOp::kSum) continue;
        CollectiveSpec s{.kind = c, .type = t, .op = op, .root = 1};
        for (int n : {2, 3, 5, 8, 13}) {
          if (!Check(s, n)) continue;
          Shape sh = ShapeOf(s, 840 * TypeSize(t), n);
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < sh.recv; ++i) {
              auto want = Reference(s, sh, n, r, i);
              auto got = ExpectedValue(s, sh, n, r, i);
              INFO(Name(c) << " " << Name(t) << " " << Name(op) << " n " << n << " rank " << r
                           << " i " << i);
              REQUIRE(want.has_value() == got.has_value());
              if (want) REQUIRE(*got == Approx(*want));
              ++checked;
            }
          }
        }
      }
    }
  }
  CHECK(checked > 100000);
  // int8 sums wrap: 13 ranks of up to 4 x 7 go past 127.
  CollectiveSpec s{.type = DataType::kInt8};
  Shape sh = ShapeOf(s, 64, 13);
  CHECK(*ExpectedValue(s, sh, 13, 0, 6) == AsType(DataType::kInt8, 31 * 7));
}

TEST_CASE(
    "The table, the CSV and the JSON carry nccl-tests' columns, N/A where a size has no in-place "
    "run") {
  CollectiveSpec s{.kind = Collective::kAllToAll, .type = DataType::kFloat32};
  std::vector<SizeResult> r = {
      {.bytes = 1 << 20, .count = 1 << 18, .out_of_place = {.seconds = 1e-3}}};
  std::string table = ResultTable(s, 4, r);
  CHECK_THAT(table,
             Catch::Contains("#wrong") && Catch::Contains("algbw") && Catch::Contains("N/A"));
  CHECK_THAT(table,
             Catch::Contains("1048576") && Catch::Contains("float") && Catch::Contains("none"));
  CHECK_THAT(table, Catch::Contains("1.05    0.79"));  // algbw 1.05 GB/s, busbw 3/4 of it
  std::string csv = ResultCsv(s, 4, r);
  CHECK_THAT(csv, Catch::StartsWith("collective,ranks,size,count,type,redop,root,place,time_us"));
  CHECK_THAT(csv, Catch::Contains("alltoall,4,1048576,262144,float,none,-1,out-of-place,1000.000"));
  auto j = ResultJson(s, 4, r);
  CHECK(j["sizes"][0]["inPlace"].is_null());
  CHECK(j["sizes"][0]["outOfPlace"]["busbwGBps"] == Approx(1.048576 * 0.75));
}

TEST_CASE("An all_gather sweep prints nccl-tests' table layout (golden, synthetic timings)") {
  CollectiveSpec s{.kind = Collective::kAllGather, .type = DataType::kFloat32};
  std::vector<SizeResult> r = {{.bytes = 134217728,
                                .count = 33554432,
                                .out_of_place = {.seconds = 0.0012},
                                .in_place = PlaceResult{.seconds = 0.00125}},
                               {.bytes = 268435456,
                                .count = 67108864,
                                .out_of_place = {.seconds = 0.0023, .wrong = 3},
                                .in_place = PlaceResult{.seconds = 0.0024}}};
  // 16 ranks: busbw is 15/16 of algbw; 128 MiB in 1.2 ms is 111.85 GB/s. The lines as nccl-tests
  // v2.16.9's all_gather_perf prints them (its common.cu format strings), trailing spaces included;
  // the footer's average is over every place of every size, and a size with wrong elements counts
  // once per place.
  const std::string golden =
      "#\n"
      "#                                                              out-of-place                 "
      "      in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)       \n"
      "   134217728      33554432     float    none      -1   1200.0  111.85  104.86      0   "
      "1250.0  107.37  100.66      0\n"
      "   268435456      67108864     float    none      -1   2300.0  116.71  109.42      3   "
      "2400.0  111.85  104.86      0\n"
      "# Out of bounds values : 1 FAILED\n"
      "# Avg bus bandwidth    : 104.949 \n"
      "#\n";
  CHECK(ResultTable(s, 16, r) == golden);
}

TEST_CASE("alltoall's in-place run is timed and its wrong column N/A, as nccl-tests prints it") {
  CollectiveSpec s{.kind = Collective::kAllToAll, .type = DataType::kFloat32};
  std::vector<SizeResult> r = {{.bytes = 1048576,
                                .count = 262144,
                                .out_of_place = {.seconds = 0.0005},
                                .in_place = PlaceResult{.seconds = 0.00052, .checked = false}}};
  std::string t = ResultTable(s, 4, r);
  // alltoall_perf v2.16.9: reportErrors is 0 in place, so "%5s" of "N/A"; its busbw still counts
  // in the average.
  CHECK_THAT(t, Catch::Contains("     1048576        262144     float    none      -1    500.0    "
                                "2.10    1.57      0    520.0    2.02    1.51    N/A\n"));
  CHECK_THAT(t,
             Catch::Contains("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.54262 \n"));
  auto j = ResultJson(s, 4, r);
  CHECK(j["sizes"][0]["inPlace"]["wrong"].is_null());
  CHECK(j["sizes"][0]["outOfPlace"]["wrong"] == 0);
  CHECK_THAT(ResultCsv(s, 4, r), Catch::EndsWith(",in-place,520.000,2.0165,1.5124,\n"));
}

TEST_CASE("Times keep nccl-tests' 7 columns at every scale, a clean sweep's footer says OK") {
  CollectiveSpec s{.kind = Collective::kAllReduce, .type = DataType::kFloat32};
  std::vector<SizeResult> r = {{.bytes = 8,
                                .count = 2,
                                .out_of_place = {.seconds = 12.5e-6},
                                .in_place = PlaceResult{.seconds = 13e-6}},
                               {.bytes = size_t{8} << 30,
                                .count = size_t{2} << 30,
                                .out_of_place = {.seconds = 0.12345},
                                .in_place = PlaceResult{.seconds = 1.5}}};
  std::string t = ResultTable(s, 2, r);
  // Under 100 us two decimals, from 10 ms none: 123450 us and 1500000 us still fill 7 columns,
  // so every later column stays where scripts look for it.
  CHECK_THAT(t, Catch::Contains("     8             2     float     sum      -1    12.50"));
  CHECK_THAT(t,
             Catch::Contains("  123450   69.58   69.58      0  1500000    5.73    5.73      0\n"));
  CHECK_THAT(t, Catch::Contains("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : "));
}

TEST_CASE("The watchdog waits for every phase a sweep has, each under its own deadline") {
  CHECK(Phases({}) == 7);  // init, then warm-up, timed, checked call, out of place and in place
  CHECK(Phases({.check = false}) == 5);
  // The common sweep (7 sizes) with three repeats: init + 7 x 2 x (warm-up + 3 + check).
  CHECK(Phases({.sizes = std::vector<size_t>(7, 1), .repeats = 3}) == 71);
}

}  // namespace
}  // namespace kuberdma::validator
