// SPDX-License-Identifier: Apache-2.0
// --transport gloo: PyTorch's Gloo proven over its interfaces (TCP: stock wheels build Gloo without
// ibverbs), with the job image's own Python and torch: an allreduce of `bytes`, `iters` times,
// between this pod and the others (--mode multi-pod: rank, world size and rank 0's address from
// --comm-id), every expected interface in GLOO_SOCKET_IFNAME (Gloo deals its pairs out round-robin
// over them), each interface's counters around the run. Judged by JudgeLibRuns: every interface
// carried its share. The Python is $KUBERDMA_PYTHON, else python3 on the PATH.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/base/files.h"
#include "kuberdma/contract/comm_env.h"
#include "kuberdma/validator/gid_env.h"
#include "kuberdma/validator/lib_run.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

using nlohmann::json;

namespace {

// argv: rank, world size, tcp://host:port, bytes, iters. Prints one JSON line.
constexpr const char* kScript = R"PY(
import json, sys, time
import torch, torch.distributed as dist
rank, world, url, nbytes, iters = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
dist.all_reduce(t)
dist.barrier()
t0 = time.time()
for _ in range(iters):
    dist.all_reduce(t)
dist.barrier()
dt = time.time() - t0
ok = bool(torch.all(t == float(world) ** (iters + 1)))
dist.destroy_process_group()
print(json.dumps({"ok": ok, "seconds": dt, "bytes": 2 * (world - 1) * t.numel() * 4 * iters // world,
                  "version": "torch " + torch.__version__,
                  "error": "" if ok else "allreduce gave wrong results"}))
)PY";

// The script's one line of output, or why not.
json RunPython(const std::vector<std::string>& args, int timeout_s) {
  const char* py = std::getenv("KUBERDMA_PYTHON");
  std::string python = py != nullptr && *py != '\0' ? py : "python3";
  std::string cmd = "timeout " + std::to_string(timeout_s) + " " + ShellQuote(python) + " -c " +
                    ShellQuote(kScript);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {{"error", "cannot start " + python}};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = ::pclose(p);
  auto last = out.rfind("{\"ok\"");
  json j = last == std::string::npos ? json() : json::parse(out.substr(last), nullptr, false);
  if (j.is_object()) return j;
  // Its last words (an exception's line), on one line of the report.
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' '))
    out.pop_back();
  std::string tail =
      out.substr(out.find_last_of('\n') == std::string::npos ? 0 : out.find_last_of('\n') + 1);
  if (tail.size() > 300) tail = tail.substr(tail.size() - 300);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 124) {
    return {{"error", python + " with torch's Gloo did not finish in " + std::to_string(timeout_s) +
                          " s (a peer that never joined, or an interface that carries nothing)"}};
  }
  return {{"error", python + " with torch's Gloo exited " + std::to_string(code) +
                        (tail.empty() ? std::string(" saying nothing") : ": " + tail)}};
}

}  // namespace

Report Validator::RunGloo(Report r) {
  auto ri = Rank(r);
  if (!ri || opts_.comm_id.empty()) {
    return Skip(r,
                "--transport gloo runs between pods: --mode multi-pod and --comm-id <rank 0's "
                "address>:<port>" +
                    (ri ? "" : ": " + ri.error().message()),
                2);
  }
  // Gloo over every expected interface: the control one, and any --expect adds.
  contract::CommTopology t{.control_netdev = r.devices.front().name};
  for (const auto& d : r.devices) t.tcp_interfaces.push_back(d.name);
  auto plan = contract::PlanFor(contract::Library::kGloo, t);
  if (!plan) return Skip(r, "gloo: " + plan.error().message(), 2);
  for (const auto& [k, v] : plan->vars) {
    ::setenv(k.c_str(), v.c_str(), 1);
    r.library_env.push_back(k + "=" + v);
  }
  Snapshot before = ReadCounters(r);
  json a =
      RunPython({std::to_string(ri->rank), std::to_string(ri->world_size), "tcp://" + opts_.comm_id,
                 std::to_string(opts_.bytes), std::to_string(opts_.iters)},
                opts_.timeout_s);
  Snapshot after = ReadCounters(r);
  LibRun run = LibRunFrom("gloo", "allreduce", a);
  NoteMoved(run, r, before, after);
  r.library_version = AnswerField(a, "version", std::string());
  JudgeLibRuns(r, {run});
  return r;
}

}  // namespace kuberdma::validator
