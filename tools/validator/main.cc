// SPDX-License-Identifier: Apache-2.0
// rdma-validate: proves, inside a pod, that NCCL uses every injected HCA. See docs/validator.md.
//
//   rdma-validate [--mode single|multi-pod] [--transport ib|socket] [--expect mlx5_0,mlx5_1]
//                 [--size 256M] [--iters 20] [--timeout 60] [--min-busbw GBps] [--json FILE]
//
// Exit: 0 pass, 1 validation failed, 2 environment or usage error, 3 timeout.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/validator/validate.h"

namespace {

using namespace kuberdma::validator;  // NOLINT(google-build-using-namespace): a main() file

size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024;
  if (unit == "M" || unit == "m" || unit == "MiB") mult = 1024.0 * 1024;
  if (unit == "G" || unit == "g" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v * mult);
}

int Run(int argc, char** argv) {
  CLI::App app{"rdma-validate: prove that NCCL uses every RDMA device this pod was given"};
  Options o;
  std::string mode = "single", transport = "ib", size = "256M", json_path,
              term = "/dev/termination-log";
  app.add_option("--mode", mode, "single (every rank in this pod) or multi-pod (one rank per pod)")
      ->check(CLI::IsMember({"single", "multi-pod"}));
  app.add_option("--transport", transport,
                 "ib (default; no silent fallback) or socket (TCP-only fabrics, tests)")
      ->check(CLI::IsMember({"ib", "socket"}));
  app.add_option("--expect", o.expect,
                 "expected HCAs (ib) or netdevs (socket); default: the device plugin's env");
  app.add_option(
      "--nccl-devices", o.nccl_devices,
      "tell NCCL to use these instead of the expected set (reproduce a misconfiguration)");
  app.add_option("--size", size, "AllReduce size (e.g. 256M)");
  app.add_option("--iters", o.iters, "timed iterations")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "warm-up iterations")->check(CLI::Range(0, 1000));
  app.add_option("--timeout", o.timeout_s,
                 "seconds for communicator init and each collective phase")
      ->check(CLI::Range(1, 3600));
  app.add_option("--min-busbw", o.min_busbw_gbps, "fail below this busbw (GB/s)");
  app.add_option("--min-busbw-fraction", o.min_busbw_fraction,
                 "fail below this fraction of the ports' link rate");
  app.add_option("--min-share", o.min_share,
                 "each device must carry this fraction of an even split")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--gpus", o.gpus, "single mode: local ranks (default: every GPU)");
  app.add_option("--rank", o.rank, "multi-pod: this pod's rank (default: from the environment)");
  app.add_option("--world-size", o.world_size, "multi-pod: number of ranks");
  app.add_option("--comm-id", o.comm_id, "multi-pod: NCCL_COMM_ID, <rank-0 address>:<port>");
  app.add_option("--log-dir", o.log_dir, "keep NCCL's logs here");
  app.add_option("--json", json_path, "write the JSON report here ('-' for stdout)");
  app.add_option("--termination-log", term, "one-line summary file, when it exists");
  app.add_flag("--inventory-only", o.inventory_only, "check what the pod has; run no NCCL");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  o.mode = mode == "single" ? Mode::kSingle : Mode::kMultiPod;
  o.transport = transport == "ib" ? Transport::kIb : Transport::kSocket;
  o.bytes = ParseSize(size);
  if (o.bytes < 4096) {
    std::fprintf(stderr,
                 "rdma-validate: --size %s is too small to measure bandwidth (at least 4K)\n",
                 size.c_str());
    return 2;
  }
  kuberdma::link::NetlinkLinkOps links;
  Validator v(o, kuberdma::sysfs::SysfsRoot::FromEnv(), links,
              [](const char* k) { return std::getenv(k); });
  Report r = v.Run();
  std::fputs(r.Table().c_str(), json_path == "-" ? stderr : stdout);
  if (!json_path.empty()) {
    std::string doc = r.ToJson().dump(2) + "\n";
    if (json_path == "-") {
      std::fputs(doc.c_str(), stdout);
    } else {
      std::ofstream(json_path) << doc;
    }
  }
  if (::access(term.c_str(), W_OK) == 0) std::ofstream(term) << r.Summary() << "\n";
  return r.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma-validate: internal error: %s\n", e.what());
    return 2;
  }
}
