// SPDX-License-Identifier: Apache-2.0
// Test-support only, never linked into a production binary (checked by .ci/check-targets.py):
// building the hosts that tests, benchmarks and the demo run kube-rdma on. Named network
// namespaces the way `ip netns add` makes them, binaries spawned inside a namespace, and links
// that only a test creates: veth pairs, bridges, macvlans, and traffic shaping (tbf, netem) to
// make a rail slow or lossy. Machines without the `ip` command (the GPU machines) need nothing
// else.
//
//   KUBERDMA_ASSIGN_OR_RETURN(NetNs a, testing::CreateNamed("krt-1-a"));
//   testing::TestNet net(links);                       // links: a NetlinkLinkOps
//   KUBERDMA_TRY(net.CreateVeth(a, "hca0", b, "sw0"));
//   KUBERDMA_TRY(net.SetRateLimit(b, "sw0", 1'000'000'000));  // 1 Gbit/s
//   ...
//   (void)testing::DeleteNamed("krt-1-a");
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::testing {

using netns::NetNs;

// The directory where named namespaces are bind-mounted (as iproute2 does).
inline constexpr const char* kNamedNetnsDir = "/run/netns";

// Creates a new, empty network namespace bind-mounted at /run/netns/<name> and returns a handle.
// Its loopback is down until the caller brings it up. kAlreadyExists if the name is taken.
Result<NetNs> CreateNamed(const std::string& name);

// Unmounts and removes /run/netns/<name>. The namespace dies once no process or handle holds it.
// Succeeds if it does not exist (idempotent).
Result<void> DeleteNamed(const std::string& name);

// Starts `argv` with `envp` inside `ns`; stdin/stdout/stderr are wired to the given descriptors
// (-1 keeps the parent's). Returns the child pid, for waitpid.
Result<pid_t> SpawnIn(const NetNs& ns, const std::vector<std::string>& argv,
                      const std::vector<std::string>& envp, int stdin_fd, int stdout_fd,
                      int stderr_fd);

class TestNet {
 public:
  explicit TestNet(link::NetlinkLinkOps& links) : links_(links) {}

  // Creates veth `name` in `ns` with its peer `peer` in `peer_ns`.
  Result<void> CreateVeth(const NetNs& ns, const std::string& name, const NetNs& peer_ns,
                          const std::string& peer);
  // Creates a link of `kind` ("bridge", "macvlan", "dummy") named `name` in `ns`, on top of link
  // `lower` (a name in `ns`) for stacked kinds.
  Result<void> CreateLink(const NetNs& ns, const std::string& name, const std::string& kind,
                          const std::string& lower = "");
  // Deletes link `name` in `ns`; succeeds if it is already gone.
  Result<void> DeleteLink(const NetNs& ns, const std::string& name);
  // Makes link `name` a port of bridge `master`, both in `ns`.
  Result<void> SetMaster(const NetNs& ns, const std::string& name, const std::string& master);
  // Limits what link `name` in `ns` sends to `bits_per_second` with a tbf root qdisc (as `tc
  // qdisc replace dev <name> root tbf rate <r> burst <b> latency 50ms`).
  Result<void> SetRateLimit(const NetNs& ns, const std::string& name, uint64_t bits_per_second);
  // Drops `percent` of what link `name` in `ns` sends with a netem root qdisc. kUnsupported
  // where the kernel has no sch_netem.
  Result<void> SetLoss(const NetNs& ns, const std::string& name, double percent);

 private:
  Result<void> ReplaceRootQdisc(const NetNs& ns, const std::string& name,
                                const std::vector<uint8_t>& msg, const std::string& what);
  link::NetlinkLinkOps& links_;
  nl::NlSocketCache socks_;
};

// The RTM_NEWQDISC request that replaces link `ifindex`'s root qdisc with tbf at
// `bits_per_second` (pure; tested against the uapi layout).
std::vector<uint8_t> EncodeTbf(int ifindex, uint64_t bits_per_second);

// RTM_NEWLINK creating the veth pair `name`/`peer` (as `ip link add ... type veth peer name`).
std::vector<uint8_t> EncodeVeth(const std::string& name, const std::string& peer);
// The RTM_NEWQDISC request that replaces link `ifindex`'s root qdisc with netem dropping
// `percent` of packets.
std::vector<uint8_t> EncodeNetemLoss(int ifindex, double percent);

}  // namespace kuberdma::testing
