// SPDX-License-Identifier: Apache-2.0
// Collectives as nccl-tests defines them: names, shapes, bus factors, data, expected results, the
// result table.
#include "kuberdma/validator/collective.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace kuberdma::validator {

namespace {

// The units ParseByteSize takes (lower case), each a power of 1024.
constexpr std::array<std::pair<std::string_view, int>, 14> kSizeUnits = {{{"", 0},
                                                                          {"b", 0},
                                                                          {"k", 1},
                                                                          {"kb", 1},
                                                                          {"kib", 1},
                                                                          {"m", 2},
                                                                          {"mb", 2},
                                                                          {"mib", 2},
                                                                          {"g", 3},
                                                                          {"gb", 3},
                                                                          {"gib", 3},
                                                                          {"t", 4},
                                                                          {"tb", 4},
                                                                          {"tib", 4}}};

constexpr std::array<std::pair<Collective, std::string_view>, 7> kCollectives = {{
    {Collective::kAllReduce, "all_reduce"},
    {Collective::kAllGather, "all_gather"},
    {Collective::kReduceScatter, "reduce_scatter"},
    {Collective::kAllToAll, "alltoall"},
    {Collective::kBroadcast, "broadcast"},
    {Collective::kReduce, "reduce"},
    {Collective::kSendRecv, "sendrecv"},
}};

struct TypeInfo {
  DataType type;
  std::string_view name;
  std::string_view alias;
  size_t size;
  bool is_float;
  bool is_signed;
  double eps;  // the unit roundoff of a float type
};
constexpr std::array<TypeInfo, 10> kTypes = {{
    {DataType::kInt8, "int8", "char", 1, false, true, 0},
    {DataType::kUint8, "uint8", "", 1, false, false, 0},
    {DataType::kInt32, "int32", "int", 4, false, true, 0},
    {DataType::kUint32, "uint32", "", 4, false, false, 0},
    {DataType::kInt64, "int64", "", 8, false, true, 0},
    {DataType::kUint64, "uint64", "", 8, false, false, 0},
    {DataType::kFloat16, "half", "float16", 2, true, true, 0x1p-10},
    {DataType::kBfloat16, "bfloat16", "bf16", 2, true, true, 0x1p-7},
    {DataType::kFloat32, "float", "float32", 4, true, true, 0x1p-23},
    {DataType::kFloat64, "double", "float64", 8, true, true, 0x1p-52},
}};

constexpr std::array<std::pair<RedOp, std::string_view>, 5> kOps = {{
    {RedOp::kSum, "sum"},
    {RedOp::kProd, "prod"},
    {RedOp::kMax, "max"},
    {RedOp::kMin, "min"},
    {RedOp::kAvg, "avg"},
}};

const TypeInfo& Info(DataType t) {
  for (const auto& i : kTypes) {
    if (i.type == t) return i;
  }
  return kTypes[8];
}

// What an integer sum or product becomes in the type's own (wrapping) arithmetic.
double Wrap(DataType t, int64_t v) {
  const TypeInfo& info = Info(t);
  if (info.is_float || info.size == 8) return static_cast<double>(v);
  uint64_t bits = info.size * 8;
  uint64_t m = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  if (info.is_signed && (m >> (bits - 1)) != 0) {
    return static_cast<double>(static_cast<int64_t>(m) - static_cast<int64_t>(uint64_t{1} << bits));
  }
  return static_cast<double>(m);
}

// sum over r < n of (r % 4 + 1): ten per four ranks.
int64_t RankWeights(int n) {
  int64_t full = n / 4;
  int64_t rest = n % 4;
  return full * 10 + rest * (rest + 1) / 2;
}

// The reduction of element `i` of every rank's send buffer.
double Reduced(const CollectiveSpec& s, int n, size_t i) {
  switch (s.op) {
    case RedOp::kSum:
      return Wrap(s.type, RankWeights(n) * static_cast<int64_t>((i % 7) + 1));
    case RedOp::kAvg:
      return static_cast<double>(RankWeights(n) * static_cast<int64_t>((i % 7) + 1)) / n;
    case RedOp::kProd:
      return i % 2 == 0 ? static_cast<double>(1 << std::min(n, 3)) : 1.0;
    case RedOp::kMax:
    case RedOp::kMin: {
      double best = SendValue(s, 0, i);
      for (int r = 1; r < std::min(n, 5); ++r) {
        double v = SendValue(s, r, i);
        best = s.op == RedOp::kMax ? std::max(best, v) : std::min(best, v);
      }
      return best;
    }
  }
  return 0;
}

}  // namespace

Result<Collective> ParseCollective(std::string_view name) {
  for (const auto& [c, n] : kCollectives) {
    if (n == name) return c;
  }
  return Fail(ErrorCode::kInvalidArgument,
              "unknown collective \"" + std::string(name) +
                  "\" (all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, "
                  "sendrecv, or all)");
}

Result<DataType> ParseDataType(std::string_view name) {
  for (const auto& i : kTypes) {
    if (i.name == name || (!i.alias.empty() && i.alias == name)) return i.type;
  }
  return Fail(ErrorCode::kInvalidArgument,
              "unknown datatype \"" + std::string(name) +
                  "\" (int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double)");
}

Result<RedOp> ParseRedOp(std::string_view name) {
  for (const auto& [o, n] : kOps) {
    if (n == name) return o;
  }
  return Fail(ErrorCode::kInvalidArgument,
              "unknown reduction \"" + std::string(name) + "\" (sum prod max min avg)");
}

std::vector<Collective> AllCollectives() {
  std::vector<Collective> out;
  for (const auto& [c, n] : kCollectives) out.push_back(c);
  return out;
}

std::string_view Name(Collective c) {
  for (const auto& [k, n] : kCollectives) {
    if (k == c) return n;
  }
  return "?";
}
std::string_view Name(DataType t) { return Info(t).name; }
std::string_view Name(RedOp o) {
  for (const auto& [k, n] : kOps) {
    if (k == o) return n;
  }
  return "?";
}

bool IsReduction(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
bool IsFloat(DataType t) { return Info(t).is_float; }
size_t TypeSize(DataType t) { return Info(t).size; }

Result<void> Check(const CollectiveSpec& s, int nranks) {
  if (nranks < 1) return Fail(ErrorCode::kInvalidArgument, "a collective needs ranks");
  if (IsReduction(s.kind) && s.op == RedOp::kAvg && !IsFloat(s.type)) {
    return Fail(ErrorCode::kInvalidArgument,
                "avg needs a floating-point datatype (half, bfloat16, float, double)");
  }
  bool rooted = s.kind == Collective::kBroadcast || s.kind == Collective::kReduce;
  if (rooted && (s.root < 0 || s.root >= nranks)) {
    return Fail(ErrorCode::kInvalidArgument, "--root " + std::to_string(s.root) +
                                                 " is not a rank (0.." +
                                                 std::to_string(nranks - 1) + ")");
  }
  return {};
}

double BusFactor(Collective c, int nranks) {
  double n = std::max(1, nranks);
  switch (c) {
    case Collective::kAllReduce:
      return 2 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    default:
      return 1;
  }
}

Shape ShapeOf(const CollectiveSpec& s, size_t bytes, int nranks) {
  size_t ts = TypeSize(s.type);
  auto n = static_cast<size_t>(std::max(1, nranks));
  Shape sh;
  switch (s.kind) {
    case Collective::kAllGather:  // the size is the gathered output: n pieces
      sh.send = bytes / ts / n;
      sh.recv = sh.send * n;
      sh.count = sh.recv;
      break;
    case Collective::kReduceScatter:  // the size is the input: n pieces, one stays
      sh.recv = bytes / ts / n;
      sh.send = sh.recv * n;
      sh.count = sh.send;
      break;
    case Collective::kAllToAll:  // n pieces out, n in
      sh.send = sh.recv = bytes / ts / n * n;
      sh.count = sh.send;
      sh.in_place_checked = false;
      break;
    default:
      sh.send = sh.recv = sh.count = bytes / ts;
      sh.in_place_checked = s.kind != Collective::kSendRecv;
  }
  sh.bytes = sh.count * ts;
  return sh;
}

Result<size_t> ParseByteSize(std::string_view text) {
  auto bad = [&] {
    return Fail(ErrorCode::kInvalidArgument,
                "\"" + std::string(text) +
                    "\" is not a size: a number and a unit, B, K, KB, KiB, M, MB, MiB, G, GB, GiB, "
                    "T, TB or TiB (each binary, as nccl-tests' K, M and G: 8G = 8GB = 8GiB = "
                    "8589934592 bytes)");
  };
  size_t digits = 0;
  bool dot = false;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) ||
                                  (text[digits] == '.' && !dot))) {
    dot = dot || text[digits] == '.';
    ++digits;
  }
  if (digits == 0 || text.substr(0, digits) == ".") return bad();
  std::string unit(text.substr(digits));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  int power = -1;
  for (const auto& [name, p] : kSizeUnits) {
    if (unit == name) power = p;
  }
  if (power < 0) return bad();
  double v = std::strtod(std::string(text.substr(0, digits)).c_str(), nullptr);
  double bytes = std::ldexp(v, 10 * power);
  if (!(bytes < 0x1p62)) return bad();
  return static_cast<size_t>(bytes);
}

Result<std::vector<size_t>> SweepSizes(size_t min, size_t max, double factor, size_t step) {
  if (min == 0 || max < min) {
    return Fail(ErrorCode::kInvalidArgument, "a sweep needs 0 < min bytes <= max bytes");
  }
  if (min != max && factor <= 1 && step == 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "a sweep needs a step factor above 1 (-f) or a step in bytes (-i)");
  }
  std::vector<size_t> out;
  for (auto size = static_cast<double>(min); size <= static_cast<double>(max) * (1 + 1e-9);) {
    out.push_back(static_cast<size_t>(size));
    if (out.size() > 1000) return Fail(ErrorCode::kInvalidArgument, "a sweep of over 1000 sizes");
    if (min == max) break;
    size = step > 0 ? size + static_cast<double>(step) : size * factor;
  }
  return out;
}

double SendValue(const CollectiveSpec& s, int rank, size_t i) {
  if (!IsReduction(s.kind)) return static_cast<double>((static_cast<size_t>(rank) * 13 + i) % 101);
  switch (s.op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return static_cast<double>((rank % 4 + 1) * static_cast<int>((i % 7) + 1));
    case RedOp::kProd:
      return rank < 3 && i % 2 == 0 ? 2 : 1;
    case RedOp::kMax:
    case RedOp::kMin:
      return static_cast<double>((static_cast<size_t>(rank) + i) % 5);
  }
  return 0;
}

std::optional<double> ExpectedValue(const CollectiveSpec& s, const Shape& sh, int nranks, int rank,
                                    size_t i) {
  auto n = static_cast<size_t>(std::max(1, nranks));
  auto r = static_cast<size_t>(rank);
  switch (s.kind) {
    case Collective::kAllReduce:
      return Reduced(s, nranks, i);
    case Collective::kReduce:
      if (rank != s.root) return std::nullopt;
      return Reduced(s, nranks, i);
    case Collective::kReduceScatter:
      return Reduced(s, nranks, r * sh.recv + i);
    case Collective::kBroadcast:
      return SendValue(s, s.root, i);
    case Collective::kAllGather:
      return SendValue(s, static_cast<int>(i / sh.send), i % sh.send);
    case Collective::kAllToAll: {
      size_t piece = sh.send / n;
      return SendValue(s, static_cast<int>(i / piece), r * piece + i % piece);
    }
    case Collective::kSendRecv:
      return SendValue(s, static_cast<int>((r + n - 1) % n), i);
  }
  return std::nullopt;
}

double Tolerance(const CollectiveSpec& s, int nranks, double expected) {
  const TypeInfo& info = Info(s.type);
  if (!info.is_float) return 0;
  return info.eps * std::max(1, nranks) * (std::abs(expected) + 1);
}

double AlgBw(size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

namespace {

// nccl-tests' redop column: the op's name for the reductions and for sendrecv (sendrecv_perf
// loops over the ops as all_reduce_perf does, though nothing is reduced), "none" for the rest.
std::string RedOpColumn(const CollectiveSpec& s) {
  return IsReduction(s.kind) || s.kind == Collective::kSendRecv ? std::string(Name(s.op)) : "none";
}

int RootColumn(const CollectiveSpec& s) {
  return s.kind == Collective::kBroadcast || s.kind == Collective::kReduce ? s.root : -1;
}

nlohmann::json PlaceJson(size_t bytes, const PlaceResult& p, double factor) {
  double alg = AlgBw(bytes, p.seconds);
  return {{"timeUs", p.seconds * 1e6},
          {"algbwGBps", alg},
          {"busbwGBps", alg * factor},
          {"wrong", p.checked ? nlohmann::json(p.wrong) : nlohmann::json(nullptr)}};
}

}  // namespace

namespace {

// nccl-tests' time column: more digits for shorter times, always 7 wide.
std::string TimeColumn(double seconds) {
  double us = seconds * 1e6;
  char b[32];
  std::snprintf(b, sizeof b, us >= 10000.0 ? "%7.0f" : (us >= 100.0 ? "%7.1f" : "%7.2f"), us);
  return b;
}

// One place's columns, as nccl-tests prints them ("  time  algbw  busbw  #wrong").
std::string PlaceColumns(size_t bytes, const PlaceResult& p, double factor) {
  double a = AlgBw(bytes, p.seconds);
  char b[96];
  int n = p.checked ? std::snprintf(b, sizeof b, "  %7s  %6.2f  %6.2f  %5g",
                                    TimeColumn(p.seconds).c_str(), a, a * factor,
                                    static_cast<double>(p.wrong))
                    : std::snprintf(b, sizeof b, "  %7s  %6.2f  %6.2f  %5s",
                                    TimeColumn(p.seconds).c_str(), a, a * factor, "N/A");
  return {b, static_cast<size_t>(std::max(0, n))};
}

std::string TableHeader() {
  char b[512];
  std::string out = "#\n";
  std::snprintf(b, sizeof b,
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
                "          \n",
                "", "", "", "", "");
  out += b;
  std::snprintf(b, sizeof b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong");
  out += b;
  std::snprintf(
      b, sizeof b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
      "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return out + b;
}

}  // namespace

// The layout and footer nccl-tests v2.16 print (its common.cu's format strings): scripts that
// parse all_reduce_perf's output parse this.
std::string ResultTable(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r) {
  double f = BusFactor(s.kind, nranks);
  std::string out = TableHeader();
  int out_of_bounds = 0;
  double busbw_sum = 0;
  int places = 0;
  char line[256];
  for (const auto& x : r) {
    int n = std::snprintf(line, sizeof line, "%12zu  %12zu  %8s  %6s  %6d", x.bytes, x.count,
                          std::string(Name(s.type)).c_str(), RedOpColumn(s).c_str(), RootColumn(s));
    out.append(line, static_cast<size_t>(std::max(0, n)));
    for (const PlaceResult* p : {&x.out_of_place, x.in_place ? &*x.in_place : nullptr}) {
      if (p == nullptr) {
        n = std::snprintf(line, sizeof line, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
        out.append(line, static_cast<size_t>(std::max(0, n)));
        continue;
      }
      out += PlaceColumns(x.bytes, *p, f);
      out_of_bounds += p->wrong > 0 ? 1 : 0;
      busbw_sum += AlgBw(x.bytes, p->seconds) * f;
      ++places;
    }
    out += "\n";
  }
  std::snprintf(line, sizeof line,
                "# Out of bounds values : %d %s\n# Avg bus bandwidth    : %g \n#\n", out_of_bounds,
                out_of_bounds != 0 ? "FAILED" : "OK", places > 0 ? busbw_sum / places : 0.0);
  return out + line;
}

std::string ResultCsv(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r) {
  double f = BusFactor(s.kind, nranks);
  std::string out =
      "collective,ranks,size,count,type,redop,root,place,time_us,algbw_gbps,busbw_gbps,wrong\n";
  char line[256];
  auto row = [&](const SizeResult& x, const char* place, const PlaceResult& p) {
    double a = AlgBw(x.bytes, p.seconds);
    int n = std::snprintf(line, sizeof line, "%s,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.4f,%.4f,%s\n",
                          std::string(Name(s.kind)).c_str(), nranks, x.bytes, x.count,
                          std::string(Name(s.type)).c_str(), RedOpColumn(s).c_str(), RootColumn(s),
                          place, p.seconds * 1e6, a, a * f,
                          p.checked ? std::to_string(p.wrong).c_str() : "");
    out.append(line, static_cast<size_t>(std::max(0, n)));
  };
  for (const auto& x : r) {
    row(x, "out-of-place", x.out_of_place);
    if (x.in_place) row(x, "in-place", *x.in_place);
  }
  return out;
}

nlohmann::json ResultJson(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r) {
  double f = BusFactor(s.kind, nranks);
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& x : r) {
    nlohmann::json j = {
        {"bytes", x.bytes},
        {"count", x.count},
        {"outOfPlace", PlaceJson(x.bytes, x.out_of_place, f)},
        {"inPlace", x.in_place ? PlaceJson(x.bytes, *x.in_place, f) : nlohmann::json(nullptr)}};
    sizes.push_back(j);
  }
  return {{"collective", Name(s.kind)},
          {"ranks", nranks},
          {"type", Name(s.type)},
          {"redop", RedOpColumn(s)},
          {"root", RootColumn(s)},
          {"busFactor", f},
          {"sizes", sizes}};
}

}  // namespace kuberdma::validator
