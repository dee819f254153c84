// SPDX-License-Identifier: Apache-2.0
// The communication libraries' plan, and the reading back of what a pod's environment says.
// Each format is the library's parser's (docs/comm-libs.md cites the file and line).
#include "kuberdma/contract/comm_env.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "kuberdma/contract/pod_env.h"

namespace kuberdma::contract {
namespace {

struct Named {
  Library library;
  std::string_view name;
};
constexpr Named kLibraries[] = {
    {Library::kNccl, "nccl"},   {Library::kRccl, "rccl"},       {Library::kUcx, "ucx"},
    {Library::kOpenMpi, "mpi"}, {Library::kNvshmem, "nvshmem"}, {Library::kMooncake, "mooncake"},
    {Library::kNixl, "nixl"},   {Library::kGloo, "gloo"},       {Library::kOneCcl, "oneccl"},
};

std::string Join(const std::vector<std::string>& parts, const char* sep = ",") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::vector<std::string> Split(std::string_view s, char sep = ',') {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = std::min(s.find(sep, at), s.size());
    std::string part(s.substr(at, end - at));
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) out.push_back(part);
    at = end + 1;
  }
  return out;
}

std::optional<uint32_t> Number(std::string_view s) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

Result<void> CheckInterface(const std::string& name) {
  if (name.empty() || name.find_first_of(",= ^") != std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument, "interface '" + name + "' is not one interface name");
  }
  return {};
}

Result<void> CheckInterfaces(const CommTopology& t) {
  KUBERDMA_TRY(CheckInterface(t.control_netdev));
  for (const auto& i : t.tcp_interfaces) KUBERDMA_TRY(CheckInterface(i));
  return {};
}

Result<void> Check(const CommTopology& t) {
  KUBERDMA_TRY(CheckInterfaces(t));
  if (t.hcas.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no HCA to tell the libraries about: the pod was given none (check its rdma/* "
                "request or its claim)");
  }
  for (const auto& h : t.hcas) {
    if (h.name.empty() || h.name.find_first_of(",:=^[ ") != std::string::npos) {
      return Fail(ErrorCode::kInvalidArgument,
                  "HCA name '" + h.name +
                      "' cannot go into a device list: NCCL, UCX, NVSHMEM and Mooncake split "
                      "their lists on ',' and ':' (and read '=', '^', '[' as operators)");
    }
    if (h.port == 0) {
      return Fail(ErrorCode::kInvalidArgument, "HCA " + h.name + " has port 0: ports start at 1");
    }
    if (h.link_layer != t.hcas.front().link_layer) {
      return Fail(ErrorCode::kInvalidArgument,
                  "HCAs of two fabrics in one pod (" + t.hcas.front().name + " is " +
                      t.hcas.front().link_layer + ", " + h.name + " " + h.link_layer +
                      "): one GID rule and one transport per library cannot serve both; give the "
                      "pod one fabric's HCAs");
    }
  }
  return {};
}

bool Roce(const CommTopology& t) { return t.hcas.front().link_layer == "Ethernet"; }

// The one GID index every HCA's pod-own entry has; nullopt when not known for all, or they differ.
std::optional<uint32_t> UniformGid(const CommTopology& t) {
  std::optional<uint32_t> one;
  for (const auto& h : t.hcas) {
    if (!h.gid_index || (one && *one != *h.gid_index)) return std::nullopt;
    one = h.gid_index;
  }
  return one;
}

bool GidsKnown(const CommTopology& t) {
  return std::all_of(t.hcas.begin(), t.hcas.end(), [](const auto& h) { return h.gid_index; });
}

// The HCAs one process uses: those nearest its GPU (t.local_rank), else every one.
std::vector<const CommHca*> ProcessHcas(const CommTopology& t, std::vector<std::string>& notes) {
  std::vector<const CommHca*> all, near;
  for (const auto& h : t.hcas) {
    all.push_back(&h);
    if (t.local_rank && h.nearest_gpu == *t.local_rank) near.push_back(&h);
  }
  if (!t.local_rank || !near.empty()) return t.local_rank ? near : all;
  notes.push_back("no HCA of the pod shares GPU " + std::to_string(*t.local_rank) +
                  "'s PCIe switch: the process is given every HCA");
  return all;
}

std::string DeviceList(const std::vector<const CommHca*>& hcas) {
  std::vector<std::string> out;
  for (const auto* h : hcas) out.push_back(h->name + ":" + std::to_string(h->port));
  return Join(out);
}

std::string NameList(const std::vector<const CommHca*>& hcas) {
  std::vector<std::string> out;
  for (const auto* h : hcas) out.push_back(h->name);
  return Join(out);
}

std::vector<const CommHca*> Every(const CommTopology& t) {
  std::vector<const CommHca*> out;
  for (const auto& h : t.hcas) out.push_back(&h);
  return out;
}

void GidLater(const CommTopology& t, std::string_view lib, LibraryEnv& e) {
  if (Roce(t) && !GidsKnown(t)) {
    e.notes.push_back(
        "RoCE GIDs are known only in the pod, after the CNI gave it its addresses: "
        "eval \"$(rdma-validate --env " +
        std::string(lib) + ")\" there sets the GID variables");
  }
}

void Nccl(const CommTopology& t, LibraryEnv& e) {
  if (e.library == Library::kRccl) {
    e.notes.push_back("RCCL reads NCCL's variable names (src/transport/net_ib.cc)");
  }
  IbHcaList list{.exact = true};
  for (const auto& h : t.hcas) list.entries.push_back({h.name, {h.port}});
  e.vars.emplace_back(kNcclIbHca, FormatIbHca(list));
  e.vars.emplace_back("NCCL_SOCKET_IFNAME", "=" + t.control_netdev);
  if (!Roce(t)) return;
  GidLater(t, LibraryName(e.library), e);
  if (!GidsKnown(t)) return;
  if (auto g = UniformGid(t)) {
    e.vars.emplace_back("NCCL_IB_GID_INDEX", std::to_string(*g));
  } else if (!t.roce_range.empty()) {
    // The first RoCE v2 IPv4 entry inside the range (NCCL's ncclIbGetGidIndex).
    e.vars.emplace_back("NCCL_IB_ADDR_FAMILY", "AF_INET");
    e.vars.emplace_back("NCCL_IB_ADDR_RANGE", t.roce_range);
    e.vars.emplace_back("NCCL_IB_ROCE_VERSION_NUM", "2");
  } else {
    e.notes.push_back(
        "the pod's GID indices differ between HCAs and no prefix holds only its "
        "own: NCCL takes one index or one range for every HCA and cannot be told");
  }
}

// UCX's devices, GID and rails: what UCX itself, Open MPI's pml ucx and NIXL read.
void Ucx(const CommTopology& t, LibraryEnv& e) {
  auto hcas = ProcessHcas(t, e.notes);
  e.vars.emplace_back("UCX_NET_DEVICES", DeviceList(hcas));
  const std::string rails =
      std::to_string(t.layout == ProcessLayout::kOneForAll ? hcas.size() : size_t{1});
  e.vars.emplace_back("UCX_MAX_RNDV_RAILS", rails);
  e.vars.emplace_back("UCX_MAX_RMA_RAILS", rails);
  if (t.layout == ProcessLayout::kOneForAll && hcas.size() > 1) {
    // MAX_RMA_RAILS came with RMA multi-rail in 1.14.0 (3dd0828ee9, src/ucp/core/ucp_context.c).
    e.notes.push_back(
        "UCX_MAX_RMA_RAILS needs UCX 1.14 or later: an older UCX warns that it is unused and "
        "puts and gets (NIXL's KV transfers) keep to one rail");
  }
  if (t.layout == ProcessLayout::kOneForAll && hcas.size() > 4) {
    e.notes.push_back(
        "UCX caps an endpoint's lanes (6 in 1.13, 64 from 1.16: "
        "src/ucp/core/ucp_types.h): an older UCX stripes over fewer than " +
        rails + " rails");
  }
  if (!Roce(t)) return;
  bool mlx5 = std::all_of(t.hcas.begin(), t.hcas.end(),
                          [](const auto& h) { return h.name.rfind("mlx5", 0) == 0; });
  if (!mlx5) {
    // UCX before 1.19 takes a received UD packet's address family from the completion's sl,
    // which only mlx5 fills (ud_verbs.c; fixed by 7de57ad9f9): on rxe and other verbs devices an
    // IPv4 GID's packets are read as IPv6 and dropped by the dgid check, and wireup never ends.
    e.vars.emplace_back("UCX_UD_ETH_DGID_CHECK", "n");
    e.notes.push_back(
        "not mlx5: UCX_UD_ETH_DGID_CHECK=n, or UCX before 1.19 drops every UD "
        "packet of an IPv4 RoCE GID (its wireup times out)");
  }
  GidLater(t, "ucx", e);
  if (!GidsKnown(t)) return;
  if (auto g = UniformGid(t)) {
    e.vars.emplace_back("UCX_IB_GID_INDEX", std::to_string(*g));
    return;
  }
  std::vector<std::string> subnets;
  for (const auto* h : hcas) {
    if (!h->address.empty()) subnets.push_back(h->address + "/32");
  }
  if (subnets.size() == hcas.size()) {
    e.vars.emplace_back("UCX_IB_ROCE_SUBNETS", Join(subnets));
    e.notes.push_back(
        "the GID indices differ between HCAs: UCX_IB_ROCE_SUBNETS picks each HCA's "
        "own (UCX 1.18 or later; an older UCX warns of an unknown variable and picks "
        "its own GID)");
  } else {
    e.notes.push_back(
        "the GID indices differ between HCAs and an HCA's address is not known: "
        "UCX picks its own GID");
  }
}

void OpenMpi(const CommTopology& t, LibraryEnv& e) {
  e.vars.emplace_back("OMPI_MCA_pml", "ucx");
  e.vars.emplace_back("OMPI_MCA_osc", "ucx");
  bool all_mlx = std::all_of(t.hcas.begin(), t.hcas.end(),
                             [](const auto& h) { return h.name.rfind("mlx", 0) == 0; });
  if (!all_mlx) {
    // Open MPI 4.1's pml ucx bumps its priority only for devices matching pml_ucx_devices
    // ("mlx*"); anything else falls back to ob1 (TCP) without a word.
    e.vars.emplace_back("OMPI_MCA_pml_ucx_devices", "any");
  }
  e.vars.emplace_back("OMPI_MCA_btl_tcp_if_include", t.control_netdev);
  e.vars.emplace_back("OMPI_MCA_oob_tcp_if_include", t.control_netdev);
  Ucx(t, e);
  e.notes.push_back(
      "Open MPI 5 runs its out-of-band channel in PRRTE, whose interface parameter "
      "is PRTE_MCA_oob_tcp_if_include (not set here)");
}

// The prefix every name shares, without its instance number: "rxe" for rxe0 and rxe1, "ibp" for
// ibp27s0 and ibp28s0, "mlx5" for mlx5_3 alone.
std::string CommonPrefix(const CommTopology& t) {
  std::string p = t.hcas.front().name;
  for (const auto& h : t.hcas) {
    size_t n = 0;
    while (n < p.size() && n < h.name.size() && p[n] == h.name[n]) ++n;
    p.resize(n);
  }
  if (size_t u = p.rfind('_'); u != std::string::npos) return p.substr(0, u);
  while (!p.empty() && p.back() >= '0' && p.back() <= '9') p.pop_back();
  return p;
}

void OneRange(const CommTopology& t, const char* index_var, const char* range_var, LibraryEnv& e) {
  if (!Roce(t)) return;
  GidLater(t, LibraryName(e.library), e);
  if (!GidsKnown(t)) return;
  if (auto g = UniformGid(t)) {
    e.vars.emplace_back(index_var, std::to_string(*g));
  } else if (range_var != nullptr && !t.roce_range.empty()) {
    e.vars.emplace_back(range_var, t.roce_range);
  } else {
    e.notes.push_back(std::string("the GID indices differ between HCAs: ") + index_var +
                      " is one index for every HCA, so it is left to the library's own choice");
  }
}

void Nvshmem(const CommTopology& t, LibraryEnv& e) {
  // Filtered whenever set (ibrc.cpp, ibgda.cpp, ibdevx.cpp); NIC_PE_MAPPING stays 0, so each PE
  // takes the listed NIC nearest its GPU (transport.cpp: nvshmemi_get_devices_by_distance).
  e.vars.emplace_back("NVSHMEM_HCA_LIST", DeviceList(Every(t)));
  bool mlx5 = std::all_of(t.hcas.begin(), t.hcas.end(),
                          [](const auto& h) { return h.name.rfind("mlx5", 0) == 0; });
  if (!mlx5) {
    std::string prefix = CommonPrefix(t);
    if (prefix.empty()) {
      e.notes.push_back(
          "the HCA names share no prefix: IBGDA and IBDEVX skip those without "
          "NVSHMEM_HCA_PREFIX's (default mlx5)");
    } else {
      e.vars.emplace_back("NVSHMEM_HCA_PREFIX", prefix);
    }
  }
  OneRange(t, "NVSHMEM_IB_GID_INDEX", "NVSHMEM_IB_ADDR_RANGE", e);
  e.vars.emplace_back("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", t.control_netdev);
}

void Mooncake(const CommTopology& t, LibraryEnv& e) {
  e.vars.emplace_back("MC_TE_FILTERS", NameList(Every(t)));
  const uint32_t port = t.hcas.front().port;
  bool one_port =
      std::all_of(t.hcas.begin(), t.hcas.end(), [&](const auto& h) { return h.port == port; });
  if (one_port && port != 1) e.vars.emplace_back("MC_IB_PORT", std::to_string(port));
  if (!one_port) e.notes.push_back("the HCAs' ports differ: MC_IB_PORT is one port for all");
  e.vars.emplace_back("MC_FORCE_HCA", "1");
  OneRange(t, "MC_GID_INDEX", nullptr, e);
}

void Nixl(const CommTopology& t, LibraryEnv& e) {
  Ucx(t, e);
  if (!t.control_address.empty()) {
    e.vars.emplace_back("VLLM_NIXL_SIDE_CHANNEL_HOST", t.control_address);
  }
  e.notes.push_back(
      "a NIXL UCX backend given device_list uses it instead of UCX_NET_DEVICES "
      "(src/plugins/ucx/ucx_utils.cpp)");
}

void Gloo(const CommTopology& t, LibraryEnv& e) {
  // A comma list; every process must name as many (PyTorch's distributed docs).
  e.vars.emplace_back("GLOO_SOCKET_IFNAME",
                      t.tcp_interfaces.empty() ? t.control_netdev : Join(t.tcp_interfaces));
  e.vars.emplace_back("TP_SOCKET_IFNAME", t.control_netdev);
}

void OneCcl(const CommTopology& t, LibraryEnv& e) {
  auto hcas = ProcessHcas(t, e.notes);
  e.vars.emplace_back("CCL_MNIC", t.layout == ProcessLayout::kOneForAll ? "global" : "local");
  e.vars.emplace_back("CCL_MNIC_NAME", NameList(hcas));
  e.vars.emplace_back("CCL_MNIC_COUNT", std::to_string(hcas.size()));
}

}  // namespace

std::vector<CommHca> CommHcasOf(const std::vector<HcaInfo>& hcas) {
  std::vector<CommHca> out;
  for (const auto& h : hcas) {
    bool any_active = std::any_of(h.ports.begin(), h.ports.end(),
                                  [](const PortInfo& p) { return p.state == "ACTIVE"; });
    for (const auto& p : h.ports) {
      if (any_active && p.state != "ACTIVE") continue;
      out.push_back({.name = h.name,
                     .port = p.port,
                     .link_layer = p.link_layer.empty() ? h.link_layer : p.link_layer});
    }
  }
  return out;
}

std::string_view LibraryName(Library l) {
  for (const auto& n : kLibraries) {
    if (n.library == l) return n.name;
  }
  return "?";
}

std::vector<Library> AllLibraries() {
  std::vector<Library> out;
  for (const auto& n : kLibraries) out.push_back(n.library);
  return out;
}

Result<std::vector<Library>> ParseLibraries(std::string_view list) {
  if (list == "all") return AllLibraries();
  std::vector<Library> out;
  std::vector<std::string> known;
  for (const auto& n : kLibraries) known.emplace_back(n.name);
  for (const auto& name : Split(list)) {
    auto it = std::find_if(std::begin(kLibraries), std::end(kLibraries),
                           [&](const Named& n) { return n.name == name; });
    if (it == std::end(kLibraries)) {
      return Fail(ErrorCode::kInvalidArgument,
                  "unknown library '" + name + "': one of " + Join(known, ", ") + ", or all");
    }
    if (std::find(out.begin(), out.end(), it->library) == out.end()) out.push_back(it->library);
  }
  if (out.empty()) return Fail(ErrorCode::kInvalidArgument, "no library named");
  return out;
}

Result<LibraryEnv> PlanFor(Library library, const CommTopology& t) {
  KUBERDMA_TRY(library == Library::kGloo ? CheckInterfaces(t) : Check(t));
  LibraryEnv e{.library = library};
  switch (library) {
    case Library::kNccl:
    case Library::kRccl:
      Nccl(t, e);
      break;
    case Library::kUcx:
      Ucx(t, e);
      break;
    case Library::kOpenMpi:
      OpenMpi(t, e);
      break;
    case Library::kNvshmem:
      Nvshmem(t, e);
      break;
    case Library::kMooncake:
      Mooncake(t, e);
      break;
    case Library::kNixl:
      Nixl(t, e);
      break;
    case Library::kGloo:
      Gloo(t, e);
      break;
    case Library::kOneCcl:
      OneCcl(t, e);
      break;
  }
  return e;
}

Result<std::vector<LibraryEnv>> PlanForAll(const std::vector<Library>& libraries,
                                           const CommTopology& t) {
  std::vector<LibraryEnv> out;
  std::set<std::string> said;
  for (Library l : libraries) {
    KUBERDMA_ASSIGN_OR_RETURN(LibraryEnv e, PlanFor(l, t));
    std::erase_if(e.vars, [&](const auto& kv) { return !said.insert(kv.first).second; });
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<CommDevice> ParseDeviceList(std::string_view value, bool* exclude) {
  bool deny = !value.empty() && value.front() == '^';
  if (exclude != nullptr) *exclude = deny;
  std::vector<CommDevice> out;
  for (const auto& part : Split(deny ? value.substr(1) : value)) {
    size_t colon = part.find(':');
    CommDevice d{.name = part.substr(0, colon)};
    if (colon != std::string::npos) {
      // NVSHMEM's hca:port:count: the port is the first number after the name.
      std::string_view rest = std::string_view(part).substr(colon + 1);
      d.port = Number(rest.substr(0, rest.find(':'))).value_or(0);
    }
    out.push_back(d);
  }
  return out;
}

std::map<std::string, uint32_t> CommSaid::GidIndices() const {
  std::map<std::string, uint32_t> out;
  if (ucx_gid_index) out["UCX_IB_GID_INDEX"] = *ucx_gid_index;
  if (nvshmem_gid_index) out["NVSHMEM_IB_GID_INDEX"] = *nvshmem_gid_index;
  if (mooncake_gid_index) out["MC_GID_INDEX"] = *mooncake_gid_index;
  if (nccl_gid_index) out["NCCL_IB_GID_INDEX"] = *nccl_gid_index;
  return out;
}

namespace {

// A GID index variable: a number, or (NVSHMEM's -1, UCX's "auto") the library's own choice.
void ReadGid(const std::function<const char*(const char*)>& getenv, const char* name,
             std::optional<uint32_t>& into, std::vector<std::string>* unparsed) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0' || std::string_view(v) == "auto" || std::string_view(v) == "-1")
    return;
  into = Number(v);
  if (!into && unparsed != nullptr) {
    unparsed->push_back(std::string(name) + "=" + v + " is not a GID index");
  }
}

std::optional<std::string> Str(const std::function<const char*(const char*)>& getenv,
                               const char* name) {
  const char* v = getenv(name);
  return v == nullptr || *v == '\0' ? std::nullopt : std::optional<std::string>(v);
}

}  // namespace

CommSaid ReadCommEnv(const std::function<const char*(const char*)>& getenv,
                     std::vector<std::string>* unparsed) {
  CommSaid s;
  if (auto v = Str(getenv, kUcxNetDevices); v && *v != "all") {
    s.ucx_devices = ParseDeviceList(*v, &s.ucx_devices_exclude);
  }
  s.ucx_tls = Str(getenv, "UCX_TLS");
  ReadGid(getenv, "UCX_IB_GID_INDEX", s.ucx_gid_index, unparsed);
  if (auto v = Str(getenv, "UCX_IB_ROCE_SUBNETS")) s.ucx_roce_subnets = Split(*v);
  s.ompi_pml = Str(getenv, "OMPI_MCA_pml");
  s.ompi_pml_ucx_devices = Str(getenv, "OMPI_MCA_pml_ucx_devices");
  if (auto v = Str(getenv, kNvshmemHcaList); v && v->front() != '^') {
    s.nvshmem_hcas = ParseDeviceList(*v);
  }
  ReadGid(getenv, "NVSHMEM_IB_GID_INDEX", s.nvshmem_gid_index, unparsed);
  if (auto v = Str(getenv, kMooncakeFilters)) s.mooncake_filters = Split(*v);
  ReadGid(getenv, "MC_GID_INDEX", s.mooncake_gid_index, unparsed);
  ReadGid(getenv, "NCCL_IB_GID_INDEX", s.nccl_gid_index, unparsed);
  if (auto v = Str(getenv, "GLOO_SOCKET_IFNAME")) s.gloo_ifnames = Split(*v);
  s.tp_ifname = Str(getenv, "TP_SOCKET_IFNAME");
  return s;
}

}  // namespace kuberdma::contract
