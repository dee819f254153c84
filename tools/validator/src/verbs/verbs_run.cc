// SPDX-License-Identifier: Apache-2.0
// --transport verbs: the network proven without NCCL or a GPU (judged in verbs_judge.cc). Two pods
// (multi-pod, world size 2; rank 0 listens on the NCCL_COMM_ID port + 10, rank 1 connects) run the
// verbs module's probe: per rail an RC QP between their HCAs, RDMA writes both ways and a
// ping-pong. Judged like the NCCL path: each rail's probe must complete, its port counters must
// show the bytes (traffic that went through another device is caught), and its bandwidth must reach
// --min-busbw.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/validator/module.h"
#include "kuberdma/validator/validate.h"
#include "kuberdma/validator/verbs.h"

namespace kuberdma::validator {

using nlohmann::json;

namespace {

constexpr const char* kVerbsModule = "rdma-validate-verbs.so";

}  // namespace

Result<json> VerbsProbe(const json& request) {
  KUBERDMA_ASSIGN_OR_RETURN(void* sym, ModuleSymbol(kVerbsModule, "kuberdma_verbs_probe",
                                                    "libibverbs and its providers (rdma-core's "
                                                    "ibverbs-providers)"));
  std::string out(1 << 20, '\0');
  reinterpret_cast<ProbeFn>(sym)(request.dump().c_str(), out.data(), out.size());
  json answer = json::parse(out.c_str(), nullptr, false);
  if (!answer.is_object()) return Fail(ErrorCode::kInternal, "the verbs module answered nonsense");
  if (answer.contains("error")) return Fail(ErrorCode::kIo, answer.value("error", "?"));
  return answer;
}

Report Validator::RunVerbs(Report r) {
  auto ri = Rank(r);
  if (!ri || ri->world_size != 2 || opts_.comm_id.empty()) {
    return Skip(r,
                "--transport verbs runs between two pods: --mode multi-pod with world size 2 and "
                "--comm-id <rank 0's address>:<port> (the probe listens on port + 10)" +
                    (ri ? "" : ": " + ri.error().message()),
                2);
  }
  auto colon = opts_.comm_id.rfind(':');
  int port = colon == std::string::npos ? 0 : std::atoi(opts_.comm_id.c_str() + colon + 1);
  json hcas = json::array();
  for (const auto& d : r.devices) hcas.push_back(d.name);
  json request = {{"role", ri->rank == 0 ? "server" : "client"},
                  {"peer", opts_.comm_id.substr(0, colon) + ":" + std::to_string(port + 10)},
                  {"hcas", hcas},
                  {"bytes", std::min<size_t>(opts_.bytes, size_t{8} << 20)},
                  {"iters", opts_.iters},
                  {"latencyIters", 100},
                  {"timeoutS", opts_.timeout_s}};
  Snapshot before = ReadCounters(r);
  auto answer = VerbsProbe(request);
  Snapshot after = ReadCounters(r);
  if (!answer) return Skip(r, "verbs probe: " + answer.error().message(), 2);
  JudgeVerbs(r, (*answer)["rails"], before, after);
  return r;
}

}  // namespace kuberdma::validator
