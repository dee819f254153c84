// SPDX-License-Identifier: Apache-2.0
// Builds the Hca model from class/infiniband and the device directories behind it.
#include "kuberdma/sysfs/hca.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace kuberdma::sysfs {

namespace {

// "dddd:bb:dd.f". Checked by hand: compiling a std::regex costs 1.2M instructions, 70% of a whole
// CNI ADD (measured with callgrind).
bool IsPciAddress(std::string_view s) {
  constexpr std::string_view kShape = "xxxx:xx:xx.f";
  if (s.size() != kShape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char want = kShape[i];
    if (want == 'x' && std::isxdigit(static_cast<unsigned char>(s[i])) == 0) return false;
    if (want == 'f' && (s[i] < '0' || s[i] > '7')) return false;
    if ((want == ':' || want == '.') && s[i] != want) return false;
  }
  return true;
}

std::string Basename(std::string_view path) {
  auto slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Dirname(std::string_view path) {
  auto slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? "" : path.substr(0, slash));
}

// "4: ACTIVE" -> {4, "ACTIVE"}
void ParseNumbered(const std::string& text, int* code, std::string* name) {
  auto colon = text.find(':');
  *code = std::atoi(text.c_str());
  *name = colon == std::string::npos ? text : text.substr(text.find_first_not_of(' ', colon + 1));
}

LinkLayer ParseLinkLayer(std::string_view s) {
  if (s == "InfiniBand") return LinkLayer::kInfiniBand;
  if (s == "Ethernet") return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

// Finds char devices of class `cls` (infiniband_mad) under the device whose ibdev is `name`.
void ReadMadDevices(const SysfsRoot& root, const std::string& dev, Hca* hca) {
  auto mads = root.ListDir(dev + "/infiniband_mad");
  if (!mads) return;
  for (const auto& m : *mads) {
    std::string base = dev + "/infiniband_mad/" + m;
    if (root.ReadAttrOr(base + "/ibdev", "") != hca->name) continue;
    auto port_no = static_cast<uint32_t>(std::atoi(root.ReadAttrOr(base + "/port", "0").c_str()));
    for (auto& p : hca->ports) {
      if (p.number != port_no) continue;
      if (m.rfind("umad", 0) == 0) p.umad = m;
      if (m.rfind("issm", 0) == 0) p.issm = m;
    }
  }
}

void ReadPkeys(const SysfsRoot& root, const std::string& pdir, Port* p) {
  auto keys = root.ListDir(pdir + "/pkeys");
  if (!keys) return;
  // Table order is by index, which the natural sort of "0".."127" gives.
  for (const auto& k : *keys) {
    auto v = root.ReadAttr(pdir + "/pkeys/" + k);
    if (!v) continue;
    auto pk = ParsePkey(*v);
    if (pk && *pk != 0) p->pkeys.push_back(*pk);
  }
}

// The 16 bytes of a sysfs GID ("fe80:0000:...": eight groups of four hex digits).
bool GidBytes(const std::string& gid, unsigned char out[16]) {
  std::string hex;
  for (char c : gid) {
    if (c != ':') hex += c;
  }
  if (hex.size() != 32) return false;
  for (size_t i = 0; i < 16; ++i) {
    char* end = nullptr;
    std::string byte = hex.substr(2 * i, 2);
    out[i] = static_cast<unsigned char>(std::strtoul(byte.c_str(), &end, 16));
    if (*end != '\0') return false;
  }
  return true;
}

Result<void> ReadPorts(const SysfsRoot& root, const std::string& ib, HcaDetail detail, Hca* hca) {
  KUBERDMA_ASSIGN_OR_RETURN(auto ports, root.ListDir(ib + "/ports"));
  for (const auto& num : ports) {
    std::string pdir = ib + "/ports/" + num;
    Port p;
    p.number = static_cast<uint32_t>(std::atoi(num.c_str()));
    ParseNumbered(root.ReadAttrOr(pdir + "/state", "0: UNKNOWN"), &p.state, &p.state_name);
    int phys = 0;
    ParseNumbered(root.ReadAttrOr(pdir + "/phys_state", "0: Unknown"), &phys, &p.phys_state);
    p.rate = root.ReadAttrOr(pdir + "/rate", "");
    p.rate_gbps = std::atof(p.rate.c_str());
    p.link_layer = ParseLinkLayer(root.ReadAttrOr(pdir + "/link_layer", ""));
    p.netdev = root.ReadAttrOr(pdir + "/gid_attrs/ndevs/0", "");
    if (detail == HcaDetail::kPkeys || detail == HcaDetail::kTables) ReadPkeys(root, pdir, &p);
    if (detail == HcaDetail::kTables) {
      if (auto gids = ReadGidTable(root, hca->name, p.number)) p.gids = std::move(*gids);
    }
    hca->ports.push_back(std::move(p));
  }
  return {};
}

}  // namespace

std::string_view LinkLayerName(LinkLayer ll) {
  switch (ll) {
    case LinkLayer::kInfiniBand:
      return "InfiniBand";
    case LinkLayer::kEthernet:
      return "Ethernet";
    case LinkLayer::kUnknown:
      break;
  }
  return "unknown";
}

LinkLayer Hca::link_layer() const {
  return ports.empty() ? LinkLayer::kUnknown : ports.front().link_layer;
}

const Port* Hca::port(uint32_t number) const {
  for (const auto& p : ports) {
    if (p.number == number) return &p;
  }
  return nullptr;
}

namespace {

// The uverbs device of `name`, searched in class/infiniband_verbs (a virtual HCA has no device
// directory to look under).
std::string UverbsOf(const SysfsRoot& root, const std::string& name) {
  auto verbs = root.ListDir("class/infiniband_verbs");
  if (!verbs) return "";
  for (const auto& v : *verbs) {
    if (root.ReadAttrOr("class/infiniband_verbs/" + v + "/ibdev", "") == name) return v;
  }
  return "";
}

// A software RDMA device (rxe, siw): no device link, so no bus, PCI address or NUMA node; its
// netdev is its `parent` attribute (rxe), the uverbs device found by name.
Result<Hca> ReadVirtualHca(const SysfsRoot& root, Hca hca, HcaDetail detail) {
  std::string ib = "class/infiniband/" + hca.name;
  auto path = root.Resolve(ib);
  if (!path) return Fail(path.error().Wrap("RDMA device " + hca.name + " cannot be read"));
  hca.bus = BusKind::kVirtual;
  hca.device_path = *path;
  hca.node_guid = root.ReadAttrOr(ib + "/node_guid", "");
  if (std::string parent = root.ReadAttrOr(ib + "/parent", ""); !parent.empty())
    hca.netdevs.push_back(parent);
  hca.uverbs = UverbsOf(root, hca.name);
  if (detail != HcaDetail::kIdentity) {
    hca.fw_version = root.ReadAttrOr(ib + "/fw_ver", "");
    KUBERDMA_TRY(ReadPorts(root, ib, detail, &hca));
    ReadMadDevices(root, "class", &hca);  // class/infiniband_mad: no device directory to look in
  }
  return hca;
}

// The N of the PF's virtfnN link that resolves to `vf_address`, or -1.
int VfIndexAt(const SysfsRoot& root, const std::string& pf_dir, const std::string& vf_address) {
  auto entries = root.ListDir(pf_dir);
  if (!entries) return -1;
  for (const auto& e : *entries) {
    if (e.rfind("virtfn", 0) != 0) continue;
    auto target = root.Resolve(pf_dir + "/" + e);
    if (target && Basename(*target) == vf_address) return std::atoi(e.c_str() + 6);
  }
  return -1;
}

}  // namespace

Result<Hca> ReadHca(const SysfsRoot& root, const std::string& name, HcaDetail detail) {
  std::string ib = "class/infiniband/" + name;
  if (!root.Exists(ib)) return Fail(ErrorCode::kNotFound, "no RDMA device " + name);
  Hca hca;
  hca.name = name;
  auto dev = root.Resolve(ib + "/device");
  if (!dev) return ReadVirtualHca(root, std::move(hca), detail);
  hca.device_path = *dev;
  hca.address = Basename(*dev);
  std::string pci_dir = *dev;
  if (IsPciAddress(hca.address)) {
    hca.pci_address = hca.address;
  } else {
    // An auxiliary device (mlx5_core.sf.N) hangs below its parent PCI function.
    hca.bus = BusKind::kAuxiliary;
    pci_dir = Dirname(*dev);
    hca.pci_address = Basename(pci_dir);
  }
  hca.vendor = root.ReadAttrOr(pci_dir + "/vendor", "");
  hca.device_id = root.ReadAttrOr(pci_dir + "/device", "");
  hca.numa_node = std::atoi(root.ReadAttrOr(pci_dir + "/numa_node", "-1").c_str());
  if (auto drv = root.Resolve(*dev + "/driver")) hca.driver = Basename(*drv);
  if (auto pf = root.Resolve(pci_dir + "/physfn")) {
    hca.pf_address = Basename(*pf);
    hca.vf_index = VfIndexAt(root, *pf, hca.pci_address);
  }
  hca.node_guid = root.ReadAttrOr(ib + "/node_guid", "");
  if (auto nets = root.ListDir(*dev + "/net")) hca.netdevs = std::move(*nets);
  if (auto verbs = root.ListDir(*dev + "/infiniband_verbs")) {
    for (const auto& v : *verbs) {
      if (root.ReadAttrOr(*dev + "/infiniband_verbs/" + v + "/ibdev", "") == name) hca.uverbs = v;
    }
  }
  if (detail != HcaDetail::kIdentity) {
    hca.fw_version = root.ReadAttrOr(ib + "/fw_ver", "");
    KUBERDMA_TRY(ReadPorts(root, ib, detail, &hca));
    ReadMadDevices(root, *dev, &hca);
  }
  return hca;
}

Result<std::vector<Hca>> DiscoverHcas(const SysfsRoot& root, HcaDetail detail) {
  std::vector<Hca> out;
  if (!root.Exists("class/infiniband")) return out;
  KUBERDMA_ASSIGN_OR_RETURN(auto names, root.ListDir("class/infiniband"));
  for (const auto& n : names) {
    KUBERDMA_ASSIGN_OR_RETURN(Hca h, ReadHca(root, n, detail));
    out.push_back(std::move(h));
  }
  return out;
}

Result<Hca> HcaForNetdev(const SysfsRoot& root, const std::string& ifname, HcaDetail detail) {
  auto dev = root.Resolve("class/net/" + ifname + "/device");
  if (!dev) return Fail(ErrorCode::kNotFound, "netdev " + ifname + " has no device in sysfs");
  KUBERDMA_ASSIGN_OR_RETURN(auto hcas, DiscoverHcas(root, HcaDetail::kIdentity));
  for (const auto& h : hcas) {
    if (h.device_path == *dev) return ReadHca(root, h.name, detail);
  }
  return Fail(ErrorCode::kNotFound, "netdev " + ifname + " belongs to no RDMA device");
}

Result<Hca> HcaForAddress(const SysfsRoot& root, const std::string& address, HcaDetail detail) {
  std::string want = address;
  if (want.size() == 7 && want[2] == ':') want = "0000:" + want;  // "1a:00.0"
  for (auto& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  KUBERDMA_ASSIGN_OR_RETURN(auto hcas, DiscoverHcas(root, HcaDetail::kIdentity));
  for (const auto& h : hcas) {
    if (h.address == want) return ReadHca(root, h.name, detail);
  }
  return Fail(ErrorCode::kNotFound, "no RDMA device at bus address " + address);
}

Result<std::vector<std::string>> NetdevsAtAddress(const SysfsRoot& root,
                                                  const std::string& address) {
  for (const char* bus : {"bus/pci/devices/", "bus/auxiliary/devices/"}) {
    std::string dev = bus + address;
    if (!root.Exists(dev)) continue;
    auto nets = root.ListDir(dev + "/net");
    return nets ? std::move(*nets) : std::vector<std::string>{};
  }
  return Fail(ErrorCode::kNotFound, "no PCI or auxiliary device " + address);
}

std::optional<rdma::NetnsMode> BootNetnsMode(const SysfsRoot& root) {
  auto v = root.ReadAttr("module/ib_core/parameters/netns_mode");
  if (!v || v->empty()) return std::nullopt;
  // A bool parameter: Y (or 1) is shared, the kernel's default.
  bool shared = (*v)[0] == 'Y' || (*v)[0] == '1';
  return shared ? rdma::NetnsMode::kShared : rdma::NetnsMode::kExclusive;
}

bool Gid::IsLinkLocal() const {
  unsigned char b[16];
  return GidBytes(gid, b) && b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
}

std::string Gid::Ipv4() const {
  unsigned char b[16];
  if (!GidBytes(gid, b)) return "";
  for (int i = 0; i < 10; ++i) {
    if (b[i] != 0) return "";
  }
  if (b[10] != 0xff || b[11] != 0xff) return "";
  return std::to_string(b[12]) + "." + std::to_string(b[13]) + "." + std::to_string(b[14]) + "." +
         std::to_string(b[15]);
}

std::string Gid::Address() const {
  unsigned char b[16];
  if (!GidBytes(gid, b)) return gid;
  char buf[INET6_ADDRSTRLEN];
  return ::inet_ntop(AF_INET6, b, buf, sizeof buf) != nullptr ? buf : gid;
}

const Gid* FirstRoutableV2(const std::vector<Gid>& gids, std::string_view netdev) {
  for (const auto& g : gids) {
    if (g.IsRoceV2() && !g.IsLinkLocal() && (netdev.empty() || g.netdev == netdev)) return &g;
  }
  return nullptr;
}

const Gid* FirstV2ForAddresses(const std::vector<Gid>& gids, const std::vector<std::string>& ipv4) {
  for (const auto& g : gids) {
    if (!g.IsRoceV2() || g.Ipv4().empty()) continue;
    if (std::find(ipv4.begin(), ipv4.end(), g.Ipv4()) != ipv4.end()) return &g;
  }
  return nullptr;
}

Result<std::vector<Gid>> ReadGidTable(const SysfsRoot& root, const std::string& hca,
                                      uint32_t port) {
  std::string pdir = "class/infiniband/" + hca + "/ports/" + std::to_string(port);
  KUBERDMA_ASSIGN_OR_RETURN(auto entries, root.ListDir(pdir + "/gids"));
  std::vector<Gid> out;
  for (const auto& e : entries) {
    auto v = root.ReadAttr(pdir + "/gids/" + e);
    if (!v || *v == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    // An unpopulated entry's attributes read EINVAL; on InfiniBand there are none at all.
    out.push_back({.index = static_cast<uint32_t>(std::atoi(e.c_str())),
                   .gid = *v,
                   .type = root.ReadAttrOr(pdir + "/gid_attrs/types/" + e, ""),
                   .netdev = root.ReadAttrOr(pdir + "/gid_attrs/ndevs/" + e, "")});
  }
  return out;
}

std::string FormatPkey(uint16_t pkey) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", pkey);
  return buf;
}

Result<uint16_t> ParsePkey(std::string_view text) {
  std::string s(text);
  if (s.empty()) return Fail(ErrorCode::kInvalidArgument, "empty pkey");
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v > 0xffff || s[0] == '-') {
    return Fail(ErrorCode::kInvalidArgument,
                "pkey '" + s + "' is not a 16-bit number (expected e.g. \"0xffff\")");
  }
  return static_cast<uint16_t>(v);
}

}  // namespace kuberdma::sysfs
