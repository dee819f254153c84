// SPDX-License-Identifier: Apache-2.0
// A library's probe judged (--transport ucx|mpi|gloo): UCX's ep_cfg lanes read from its own log
// lines, a rail whose counters did not move its phase's bytes, a NIC left out of a striped phase,
// a fallback to TCP, a failed phase; each a problem naming the library, the NIC and the fix.
#include <catch2/catch.hpp>

#include "kuberdma/validator/lib_run.h"

namespace kuberdma::validator {
namespace {

Report TwoHcas() {
  Report r;
  r.devices = {{.name = "rxe0"}, {.name = "rxe1"}};
  return r;
}

std::string Problems(const Report& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

TEST_CASE("UCX's ep_cfg lines name the lanes it chose, each once") {
  const std::string log =
      "[1796529067.806954] [vm-ucx1:190  :0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: "
      "tag(rc_verbs/rxe0:1 rc_verbs/rxe1:1)\n"
      "[1796529104.352170] [vm-ucx1:202  :0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[1]: "
      "rma(rc_verbs/rxe0:1) am(self/memory tcp/eth0)\n"
      "some other line (not/this)\n";
  CHECK(UcxLanes(log) ==
        std::vector<std::string>{"rc_verbs/rxe0:1", "rc_verbs/rxe1:1", "self/memory", "tcp/eth0"});
  CHECK(UcxLanes("").empty());
}

TEST_CASE("A probe's answer: its fields where they have their types, else a failed phase") {
  LibRun good = LibRunFrom(
      "gloo", "allreduce",
      nlohmann::json::parse(R"({"ok": true, "error": "", "seconds": 0.25, "bytes": 83886080})"));
  CHECK(good.library == "gloo");
  CHECK(good.phase == "allreduce");
  CHECK(good.ok);
  CHECK(good.error.empty());
  CHECK(good.seconds == 0.25);
  CHECK(good.bytes == 83886080);

  // The job's library wrote it: a field of another type is absent, never an exception.
  LibRun odd = LibRunFrom(
      "mpi", "alltoall",
      nlohmann::json::parse(R"({"ok": "yes", "error": 7, "seconds": "1", "bytes": -5})"));
  CHECK_FALSE(odd.ok);
  CHECK(odd.error == "the probe did not say it passed");
  CHECK(odd.seconds == 0);
  CHECK(odd.bytes == 0);
  CHECK(AnswerField(nlohmann::json::parse(R"({"rank": "1"})"), "rank", 0) == 0);
  CHECK(AnswerField(nlohmann::json::parse(R"({"rank": 1})"), "rank", 0) == 1);
  CHECK(AnswerField(nlohmann::json::parse(R"({"version": "1.13.1"})"), "version", std::string()) ==
        "1.13.1");

  LibRun none = LibRunFrom("ucx", "tag", nlohmann::json::parse("[1, 2]"));
  CHECK_FALSE(none.ok);
  CHECK(none.error == "the probe gave no answer");

  LibRun said = LibRunFrom("ucx", "rma", nlohmann::json{{"error", "UCX: no such device"}});
  CHECK_FALSE(said.ok);
  CHECK(said.error == "UCX: no such device");
}

TEST_CASE("Each rail proven on its own: its counters moved the phase's bytes, over RDMA") {
  Report r = TwoHcas();
  std::vector<LibRun> runs = {{.library = "ucx",
                               .rail = "rxe0:1",
                               .phase = "tag",
                               .ok = true,
                               .seconds = 1,
                               .bytes = 1000,
                               .lanes = {"rc_verbs/rxe0:1", "self/memory"},
                               .moved = {{"rxe0", 1100}, {"rxe1", 0}}},
                              {.library = "ucx",
                               .rail = "rxe1:1",
                               .phase = "tag",
                               .ok = true,
                               .seconds = 1,
                               .bytes = 1000,
                               .lanes = {"rc_verbs/rxe1:1"},
                               .moved = {{"rxe0", 1100}, {"rxe1", 10}}}};
  JudgeLibRuns(r, runs);
  CHECK(r.verdict == "fail");
  CHECK(r.problems.size() == 1);
  CHECK_THAT(Problems(r), Catch::Contains("ucx tag on rxe1:1: rxe1's counters moved 10 bytes") &&
                              Catch::Contains("another device"));
  CHECK(r.library_runs.size() == 2);
  CHECK(r.devices[0].carried_traffic);
}

TEST_CASE("Every NIC at once: a NIC left out, a TCP lane, a failed phase are each named") {
  Report r = TwoHcas();
  r.opts.min_share = 0.5;
  std::vector<LibRun> runs = {
      {.library = "ucx",
       .phase = "rma",
       .ok = true,
       .seconds = 1,
       .bytes = 2000,
       .lanes = {"rc_verbs/rxe0:1"},
       .moved = {{"rxe0", 2000}, {"rxe1", 40}}},
      {.library = "mpi",
       .phase = "allreduce",
       .ok = true,
       .seconds = 1,
       .bytes = 2000,
       .lanes = {"tcp/eth0"},
       .moved = {{"rxe0", 0}, {"rxe1", 0}}},
      {.library = "mpi", .phase = "alltoall", .ok = false, .error = "MPI_Alltoall: timeout"}};
  JudgeLibRuns(r, runs);
  std::string p = Problems(r);
  CHECK_THAT(p, Catch::Contains("ucx rma: rxe1 carried 2.0% of the bytes") &&
                    Catch::Contains("UCX_MAX_RMA_RAILS"));
  CHECK_THAT(p, Catch::Contains("mpi allreduce: fell back to TCP (tcp/eth0"));
  CHECK_THAT(p, Catch::Contains("mpi alltoall failed: MPI_Alltoall: timeout"));
  CHECK(r.exit_code == 1);
}

TEST_CASE("A phase that carried every NIC's share over RDMA passes") {
  Report r = TwoHcas();
  JudgeLibRuns(r, {{.library = "ucx",
                    .phase = "tag",
                    .ok = true,
                    .seconds = 2,
                    .bytes = 4000,
                    .lanes = {"rc_verbs/rxe0:1", "rc_verbs/rxe1:1"},
                    .moved = {{"rxe0", 2100}, {"rxe1", 2050}}}});
  CHECK(r.problems.empty());
  CHECK(r.verdict == "pass");
  CHECK_THAT(r.devices[1].notes.front(), Catch::Contains("ucx tag: 0.00 MB/s, 2050 bytes"));
}

}  // namespace
}  // namespace kuberdma::validator
