// SPDX-License-Identifier: Apache-2.0
// The collectives rdma-validate runs, as nccl-tests defines them: what the size of a run means for
// each (its buffers), the bus bandwidth factor that makes figures comparable across collectives
// and rank counts, the data every rank sends and the result every rank must receive (the
// correctness check), the sweep of sizes, and the result table in nccl-tests' columns. Pure: the
// runner (runner_nccl.cc) is the only part that touches a GPU.
//
//   CollectiveSpec s{.kind = Collective::kAllGather, .type = DataType::kBfloat16};
//   Shape sh = ShapeOf(s, 128 << 20, 16);   // per-rank send/recv elements for 128 MiB
//   double bus = BusFactor(s.kind, 16);       // (n-1)/n
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kSendRecv
};
enum class DataType {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64
};
enum class RedOp { kSum, kProd, kMax, kMin, kAvg };

struct CollectiveSpec {
  Collective kind = Collective::kAllReduce;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;  // the reductions' (all_reduce, reduce_scatter, reduce)
  int root = 0;            // broadcast's and reduce's
};

// nccl-tests' names: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce,
// sendrecv; types int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double (and their
// aliases float16, float32, float64, bf16); ops sum prod max min avg.
Result<Collective> ParseCollective(std::string_view name);
Result<DataType> ParseDataType(std::string_view name);
Result<RedOp> ParseRedOp(std::string_view name);
// Every collective by name, in nccl-tests' order ("all" on the command line).
std::vector<Collective> AllCollectives();
std::string_view Name(Collective c);
std::string_view Name(DataType t);
std::string_view Name(RedOp o);
bool IsReduction(Collective c);
bool IsFloat(DataType t);
size_t TypeSize(DataType t);
// kInvalidArgument when the combination cannot run (avg of integers, a root outside the ranks).
Result<void> Check(const CollectiveSpec& s, int nranks);

// busbw = algbw * BusFactor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather, reduce_scatter and
// alltoall; 1 for broadcast, reduce and sendrecv.
double BusFactor(Collective c, int nranks);

// What a run of `bytes` means, as nccl-tests' size column: the whole buffer of all_reduce,
// broadcast, reduce and sendrecv; all_gather's output; reduce_scatter's and alltoall's input.
// Elements per rank, `bytes` rounded down to what divides evenly among the ranks.
struct Shape {
  size_t bytes = 0;  // the size column, after rounding
  size_t count = 0;  // the count column: elements of the size column
  size_t send = 0;   // elements in each rank's send buffer
  size_t recv = 0;   // elements in each rank's receive buffer
  // Whether an in-place run's result is defined, so checked. alltoall and sendrecv in place (the
  // send buffer the receive buffer) are timed, as nccl-tests times them, but what they leave is
  // not defined: nccl-tests prints N/A for their wrong elements, and so do we.
  bool in_place_checked = true;
};
Shape ShapeOf(const CollectiveSpec& s, size_t bytes, int nranks);

// The sizes of a sweep, nccl-tests' -b/-e with -f (multiply) or -i (add); one size when min ==
// max. kInvalidArgument for an empty or endless sweep.
Result<std::vector<size_t>> SweepSizes(size_t min, size_t max, double factor, size_t step);

// A size as nccl-tests and the docs write it: a number (a fraction allowed) and a unit, each unit
// binary as nccl-tests' K, M and G are: "" or B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (any
// case). "8G", "8GB" and "8GiB" are all 8 * 2^30. Anything else (a unit it does not know, a
// space, a sign, nothing) is kInvalidArgument naming what it takes, never a silent 8.
Result<size_t> ParseByteSize(std::string_view text);

// Element `i` of rank `rank`'s send buffer (small integers, exact in every type), and element `i`
// of `rank`'s receive buffer after the collective, for the correctness check; nullopt where the
// collective leaves it undefined (reduce's non-root ranks). The expected value is computed in
// O(1) per element, in the type's arithmetic (integers wrap).
double SendValue(const CollectiveSpec& s, int rank, size_t i);
std::optional<double> ExpectedValue(const CollectiveSpec& s, const Shape& sh, int nranks, int rank,
                                    size_t i);
// How far a received floating-point value may be from the exact one (the order NCCL reduces in
// rounds a large sum); 0 for integers.
double Tolerance(const CollectiveSpec& s, int nranks, double expected);

// One size's figures, as nccl-tests prints them: time per iteration (the slowest rank's), algbw,
// busbw and the number of wrong elements, out of place and in place (nullopt: not run).
struct PlaceResult {
  double seconds = 0;
  uint64_t wrong = 0;
  bool checked = true;  // false: no defined result to count (alltoall, sendrecv in place)
};
struct SizeResult {
  size_t bytes = 0;
  size_t count = 0;
  PlaceResult out_of_place;
  std::optional<PlaceResult> in_place;
};
double AlgBw(size_t bytes, double seconds);  // GB/s
std::string ResultTable(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r);
std::string ResultCsv(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r);
nlohmann::json ResultJson(const CollectiveSpec& s, int nranks, const std::vector<SizeResult>& r);

}  // namespace kuberdma::validator
