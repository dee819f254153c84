// SPDX-License-Identifier: Apache-2.0
// rdma-doctor's views and checks.
#include "kuberdma/doctor/doctor.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/deviceplugin/podresources.h"
#include "kuberdma/sysfs/topology.h"
#include "kuberdma/podenv/pod_env.h"

namespace kuberdma::doctor {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* StatusName(Status s) {
  return s == Status::kOk ? "ok" : (s == Status::kWarn ? "warn" : "FAIL");
}

void Add(View& v, std::string check, Status s, std::string msg, std::string fix = "") {
  v.findings.push_back({std::move(check), s, std::move(msg), std::move(fix)});
}

std::string Env(const Inputs& in, const char* k) {
  const char* v = in.getenv ? in.getenv(k) : nullptr;
  return v == nullptr ? "" : v;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + std::string(1, sep)) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::vector<std::string> Names(const std::vector<sysfs::Hca>& hcas) {
  std::vector<std::string> out;
  for (const auto& h : hcas) out.push_back(h.name);
  return out;
}

// The HCAs this pod was given, from the device plugin's env.
std::vector<std::string> Ours(const Inputs& in) {
  auto pod = podenv::Read(in.getenv ? in.getenv : [](const char*) -> const char* { return nullptr; });
  return pod ? pod->HcaNames() : std::vector<std::string>{};
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

int View::ExitCode() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.status == Status::kFail; })
             ? 1
             : 0;
}

json View::ToJson() const {
  json f = json::array();
  for (const auto& x : findings) {
    f.push_back({{"check", x.check},
                 {"status", StatusName(x.status)},
                 {"message", x.message},
                 {"fix", x.fix}});
  }
  return {{"view", name}, {"result", doc}, {"findings", f}, {"exitCode", ExitCode()}};
}

std::string Render(const View& v) {
  std::ostringstream o;
  o << "rdma-doctor " << v.name << "\n";
  if (v.doc.contains("hcas")) {
    for (const auto& h : v.doc["hcas"]) {
      o << "  " << h.value("name", "") << "  " << h.value("address", "") << "  numa "
        << h.value("numaNode", -1) << "  " << h.value("linkLayer", "") << "  port "
        << h.value("portState", "") << "  netdev " << h.value("netdev", "-") << " ("
        << h.value("where", "") << ")\n";
    }
  }
  if (v.doc.contains("matrix")) {
    const auto& hcas = v.doc["hcaNames"];
    o << "  " << std::string(18, ' ');
    for (const auto& h : hcas) {
      char b[16];
      std::snprintf(b, sizeof b, "%-8s", h.get<std::string>().c_str());
      o << b;
    }
    o << " nearest\n";
    for (const auto& row : v.doc["matrix"]) {
      char b[32];
      std::snprintf(b, sizeof b, "  GPU %-14s", row["gpu"].get<std::string>().c_str());
      o << b;
      for (const auto& d : row["distances"]) {
        std::snprintf(b, sizeof b, "%-8s", d.get<std::string>().c_str());
        o << b;
      }
      o << " " << Join(row["nearest"].get<std::vector<std::string>>()) << "\n";
    }
  }
  for (const char* key :
       {"netnsMode", "devicePlugin", "allocations", "cniRecords", "netdevs", "devices", "env"}) {
    if (v.doc.contains(key)) o << "  " << key << ": " << v.doc[key].dump() << "\n";
  }
  for (const auto& f : v.findings) {
    o << "  [" << StatusName(f.status) << "] " << f.check << ": " << f.message << "\n";
    if (f.status != Status::kOk && !f.fix.empty()) o << "         fix: " << f.fix << "\n";
  }
  return o.str();
}

Result<std::vector<Allocation>> ReadCheckpoint(const std::string& path) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return Fail(ErrorCode::kInvalidArgument, path + " is not a kubelet checkpoint");
  std::vector<Allocation> out;
  auto entries =
      doc.contains("Data") ? doc["Data"].value("PodDeviceEntries", json::array()) : json::array();
  for (const auto& e : entries) {
    std::string res = e.value("ResourceName", "");
    if (res.rfind("rdma/", 0) != 0) continue;
    Allocation a{e.value("PodUID", ""), e.value("ContainerName", ""), res, {}};
    const auto& ids = e.contains("DeviceIDs") ? e["DeviceIDs"] : json::array();
    if (ids.is_array()) {  // before Kubernetes 1.20: a plain list
      for (const auto& id : ids) a.device_ids.push_back(id.get<std::string>());
    } else if (ids.is_object()) {  // NUMA node -> IDs
      for (const auto& [numa, list] : ids.items()) {
        for (const auto& id : list) a.device_ids.push_back(id.get<std::string>());
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string HostPath(const Inputs& in, const std::string& path) {
  if (in.host_root.empty() || path.empty() || path.rfind("/proc/", 0) == 0) return path;
  std::string root = in.host_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + (path.front() == '/' ? path : "/" + path);
}

View NodeView(const Inputs& in) {
  View v{"node", json::object(), {}};
  auto host = netns::NetNs::Current();
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kPorts);
  std::vector<cni::AttachmentRecord> records;
  if (auto r = cni::StateStore(in.state_dir).List()) records = *r;
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return std::tie(a.container_id, a.ifname) < std::tie(b.container_id, b.ifname);
  });
  json list = json::array();
  for (const auto& h : hcas ? *hcas : std::vector<sysfs::Hca>{}) {
    std::string nd = h.netdevs.empty() ? "" : h.netdevs.front();
    std::string where = "not in this namespace";
    if (!nd.empty() && host && in.links != nullptr && in.links->GetByName(*host, nd))
      where = "host";
    for (const auto& r : records) {
      if (r.hca_address == h.address)
        where = "pod " + r.container_id + "/" + r.ifname + " (" + r.netns + ")";
    }
    list.push_back({{"name", h.name},
                    {"address", h.address},
                    {"numaNode", h.numa_node},
                    {"linkLayer", std::string(sysfs::LinkLayerName(h.link_layer()))},
                    {"portState", h.ports.empty() ? "" : h.ports.front().state_name},
                    {"netdev", nd},
                    {"where", where}});
    if (!h.ports.empty() && h.ports.front().state != sysfs::kPortActive) {
      Add(v, "port state", Status::kWarn, h.name + " port 1 is " + h.ports.front().state_name,
          "check the cable and switch port; the device plugin marks it Unhealthy");
    }
  }
  v.doc["hcas"] = list;
  if (list.empty())
    Add(v, "HCAs present", Status::kFail,
        "no RDMA devices under " + in.root.Sys("class/infiniband"),
        "load the driver (mlx5_ib) and check ibv_devinfo");
  // Netns mode.
  std::string mode = "unknown";
  if (host && in.rdma != nullptr) {
    if (auto m = in.rdma->GetNetnsMode(*host)) mode = std::string(rdma::NetnsModeName(*m));
  }
  if (mode == "unknown") {
    if (auto boot = sysfs::BootNetnsModeShared(in.root))
      mode = std::string(*boot ? "shared" : "exclusive") + " (boot parameter)";
  }
  v.doc["netnsMode"] = mode;
  // Device plugin sockets and kubelet allocations.
  json dp = {{"dir", in.plugin_dir},
             {"kubeletSocket", fs::exists(in.plugin_dir + "/kubelet.sock")},
             {"sockets", json::array()}};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in.plugin_dir, ec)) {
    std::string n = e.path().filename();
    if (n.rfind("kuberdma-", 0) == 0) dp["sockets"].push_back(n);
  }
  v.doc["devicePlugin"] = dp;
  if (dp["sockets"].empty()) {
    Add(v, "pitfall-1: device plugin serving", Status::kFail,
        "no kuberdma-*.sock in " + in.plugin_dir,
        "the rdma-device-plugin DaemonSet is not running on this node: kubectl -n kube-rdma get "
        "pods -o wide");
  } else {
    Add(v, "pitfall-1: device plugin serving", Status::kOk,
        Join(dp["sockets"].get<std::vector<std::string>>()));
  }
  // Allocations: the pod-resources API when it answers, the checkpoint file otherwise.
  json allocs = json::array();
  std::string source = "none";
  if (fs::exists(in.pod_resources)) {
    if (auto pr = deviceplugin::ListPodResources(in.pod_resources, std::chrono::seconds(2))) {
      source = "pod-resources API";
      for (const auto& x : *pr) {
        if (x.resource.rfind("rdma/", 0) != 0) continue;
        allocs.push_back({{"pod", x.pod},
                          {"container", x.container},
                          {"resource", x.resource},
                          {"deviceIDs", x.device_ids}});
      }
    }
  }
  std::string cp =
      in.checkpoint.empty() ? in.plugin_dir + "/kubelet_internal_checkpoint" : in.checkpoint;
  if (source == "none") {
    if (auto a = ReadCheckpoint(cp)) {
      source = "checkpoint " + cp;
      for (const auto& x : *a) {
        allocs.push_back({{"podUID", x.pod_uid},
                          {"container", x.container},
                          {"resource", x.resource},
                          {"deviceIDs", x.device_ids}});
      }
    }
  }
  v.doc["allocations"] = allocs;
  v.doc["allocationsSource"] = source;
  // CNI records and stranded devices.
  json recs = json::array();
  for (const auto& r : records) {
    recs.push_back({{"network", r.network},
                    {"containerID", r.container_id},
                    {"ifname", r.ifname},
                    {"hca", r.hca},
                    {"netns", r.netns}});
    if (r.netns.empty()) continue;
    auto ns = netns::NetNs::Open(HostPath(in, r.netns));
    if (!ns && ns.error().code() == ErrorCode::kNotFound) {
      Add(v, "stranded devices", Status::kFail,
          r.hca + " is recorded for " + r.container_id + "/" + r.ifname + " in " + r.netns +
              ", which no longer exists",
          "CNI GC (or DEL of that container) restores it; the kernel has already returned the "
          "netdev to the host");
    } else if (!ns) {
      // Not seeing a namespace is not proof that it is gone: never call a live pod stranded.
      Add(v, "stranded devices", Status::kWarn,
          "cannot tell whether " + r.netns + " (" + r.container_id + "/" + r.ifname +
              ") exists: " + ns.error().message(),
          "run on the host as root, or in `kubectl debug node/<node> --profile=sysadmin` with "
          "--host-root /host");
    }
  }
  v.doc["cniRecords"] = recs;
  if (host && in.links != nullptr) {
    if (auto links = in.links->List(*host)) {
      for (const auto& l : *links) {
        bool devn = l.name.size() > 3 && l.name.rfind("dev", 0) == 0 &&
                    l.name.find_first_not_of("0123456789", 3) == std::string::npos;
        if (devn && sysfs::HcaForNetdev(in.root, l.name, sysfs::HcaDetail::kIdentity)) {
          Add(v, "stranded devices", Status::kWarn,
              l.name + " is an HCA netdev the kernel renamed when a pod's namespace died",
              "CNI DEL or GC for that pod restores its name; `rdma-doctor node --json` lists the "
              "records");
        }
      }
    }
  }
  return v;
}

View PodView(const Inputs& in) {
  View v{"pod", json::object(), {}};
  auto here = netns::NetNs::Current();
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kPorts);
  std::vector<sysfs::Hca> visible = hcas ? *hcas : std::vector<sysfs::Hca>{};
  json netdevs = json::array();
  std::vector<std::string> ifnames;
  if (here && in.links != nullptr) {
    if (auto links = in.links->List(*here)) {
      for (const auto& l : *links) {
        if (l.name == "lo") continue;
        ifnames.push_back(l.name);
        auto h = sysfs::HcaForNetdev(in.root, l.name, sysfs::HcaDetail::kIdentity);
        netdevs.push_back({{"name", l.name},
                           {"mtu", l.mtu},
                           {"up", l.admin_up && l.oper_up},
                           {"hca", h ? h->name : ""}});
      }
    }
  }
  v.doc["netdevs"] = netdevs;
  v.doc["rdmaDevices"] = Names(visible);
  // /dev/infiniband and whether each uverbs node belongs to its HCA.
  json devices = json::array();
  int uverbs = 0;
  std::error_code ec;
  std::vector<std::string> dev_names;
  for (const auto& e : fs::directory_iterator(in.root.Dev("infiniband"), ec))
    dev_names.push_back(e.path().filename().string());
  std::sort(dev_names.begin(), dev_names.end(),
            [](const auto& a, const auto& b) { return sysfs::NaturalLess(a, b); });
  for (const auto& d : dev_names) devices.push_back(d);
  v.doc["devices"] = devices;
  for (const auto& h : visible) {
    if (h.uverbs.empty()) continue;
    std::string path = in.root.Dev("infiniband/" + h.uverbs);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    ++uverbs;
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) {
      Add(v, "pitfall-6: device permissions", Status::kFail,
          path + " (" + h.name + ") cannot be opened",
          "the container needs the device plugin's injection of /dev/infiniband (request "
          "rdma/shared), not a bind mount");
    }
    if (S_ISCHR(st.st_mode)) {
      std::string want = in.root.ReadAttrOr("class/infiniband_verbs/" + h.uverbs + "/dev", "");
      std::string got = std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
      if (!want.empty() && want != got) {
        Add(v, "uverbs ownership", Status::kFail,
            path + " is " + got + " but " + h.name + "'s uverbs is " + want,
            "the container's /dev/infiniband was populated for other HCAs; let the device plugin "
            "inject it");
      }
    }
  }
  if (uverbs == 0) {
    Add(v, "pitfall-1: /dev/infiniband injected", Status::kFail,
        "no uverbs device in " + in.root.Dev("infiniband"),
        "request rdma/shared (or rdma/hca) in the container's resources; check `kubectl describe "
        "node | grep rdma`");
  } else {
    Add(v, "pitfall-1: /dev/infiniband injected", Status::kOk,
        std::to_string(uverbs) + " uverbs device(s)");
  }
  // NCCL configuration sanity.
  json env = json::object();
  for (const char* k : {podenv::kNcclIbHca, "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_NET",
                        "NCCL_MAX_NCHANNELS", podenv::kHcas}) {
    if (!Env(in, k).empty()) env[k] = Env(in, k);
  }
  v.doc["env"] = env;
  if (Env(in, "NCCL_IB_DISABLE") == "1" && !visible.empty()) {
    Add(v, "pitfall-2: NCCL over RDMA", Status::kFail,
        "NCCL_IB_DISABLE=1 while " + std::to_string(visible.size()) + " HCA(s) are present",
        "set NCCL_IB_DISABLE=0 (RoCE needs it too)");
  } else if (visible.empty()) {
    Add(v, "pitfall-2: NCCL over RDMA", Status::kFail,
        "no RDMA device is visible: NCCL can only use TCP",
        "inject HCAs with rdma-device-plugin and attach them with the rdma CNI");
  } else {
    Add(v, "pitfall-2: NCCL over RDMA", Status::kOk,
        std::to_string(visible.size()) + " HCA(s) visible");
  }
  std::vector<std::string> ours = Ours(in);
  std::vector<std::string> present = Names(visible);
  if (std::string ib = Env(in, podenv::kNcclIbHca); !ib.empty()) {
    podenv::IbHcaList parsed = podenv::ParseIbHca(ib);
    std::string list = Join(parsed.Names());
    for (const auto& name : parsed.Names()) {
      if (std::find(present.begin(), present.end(), name) == present.end()) {
        Add(v, "pitfall-3: NCCL_IB_HCA names present HCAs", Status::kFail,
            "NCCL_IB_HCA names " + name + ", which this pod does not have",
            "use the device plugin's NCCL_IB_HCA (drop the pod spec's own value) or list the pod's "
            "HCAs");
      }
      if (!parsed.exact && !parsed.exclude) {
        for (const auto& p : present) {
          if (p != name && p.rfind(name, 0) == 0) {
            Add(v, "pitfall-3: NCCL_IB_HCA exact match", Status::kWarn,
                "NCCL_IB_HCA entry " + name + " also matches " + p + " by prefix",
                "use the exact-match form: NCCL_IB_HCA==" + list);
          }
        }
      }
    }
    auto selected = parsed.Select(present);
    for (const auto& o : ours) {
      if (std::find(selected.begin(), selected.end(), o) == selected.end()) {
        Add(v, "pitfall-3: every HCA in NCCL_IB_HCA", Status::kFail,
            o + " was allocated to this pod but NCCL_IB_HCA leaves it out",
            "NCCL will not use it: include it, or let the device plugin's NCCL_IB_HCA stand");
      }
    }
  }
  if (auto mc = Env(in, "NCCL_MAX_NCHANNELS");
      !mc.empty() && std::atoi(mc.c_str()) < static_cast<int>(std::max(ours.size(), size_t{1}))) {
    Add(v, "pitfall-3: channels per NIC", Status::kWarn,
        "NCCL_MAX_NCHANNELS=" + mc + " is fewer than the pod's " + std::to_string(ours.size()) +
            " HCAs",
        "raise NCCL_MAX_NCHANNELS to at least the number of HCAs (the seed uses 32)");
  }
  auto gpus = sysfs::DiscoverGpus(in.root);
  size_t ngpu = gpus ? gpus->size() : 0;
  size_t nhca = ours.empty() ? visible.size() : ours.size();
  if (ngpu > 0 && nhca < ngpu) {
    Add(v, "pitfall-3: one NIC per GPU", Status::kWarn,
        std::to_string(nhca) + " HCA(s) for " + std::to_string(ngpu) + " GPU(s)",
        "attach one rdma-net per GPU (net1..netN) and request as many HCAs");
  }
  if (std::string ifn = Env(in, "NCCL_SOCKET_IFNAME"); ifn.empty()) {
    Add(v, "pitfall-4: NCCL_SOCKET_IFNAME", Status::kWarn,
        "NCCL_SOCKET_IFNAME is not set: NCCL picks the bootstrap interface itself",
        "set NCCL_SOCKET_IFNAME=eth0 (the pod's primary interface) so renamed NICs cannot surprise "
        "it");
  } else {
    std::string l = ifn[0] == '=' || ifn[0] == '^' ? ifn.substr(1) : ifn;
    bool any = false;
    for (const auto& item : Split(l, ',')) {
      for (const auto& n : ifnames)
        any = any || (ifn[0] == '=' ? n == item : n.rfind(item, 0) == 0);
      any = any || item == "lo";
    }
    if (!any && ifn[0] != '^') {
      Add(v, "pitfall-4: NCCL_SOCKET_IFNAME", Status::kFail,
          "NCCL_SOCKET_IFNAME=" + ifn + " names no interface of this pod (" + Join(ifnames) + ")",
          "name an interface that exists in the pod, e.g. eth0");
    }
  }
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < (64u << 20)) {
    Add(v, "pitfall-6: locked memory", Status::kWarn,
        "RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur >> 10) +
            " KiB: RDMA registration pins memory",
        "raise the container runtime's memlock limit (e.g. LimitMEMLOCK=infinity for containerd)");
  }
  std::string nccl;
  for (const auto& dir : in.lib_dirs) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string n = e.path().filename();
      if (n.rfind("libnccl.so.2.", 0) == 0 && n.size() > 13) nccl = n.substr(11);
      if (n == "libnccl.so.2" && nccl.empty()) {
        // Only the soname link: its target carries the version (libnccl.so.2.28.3).
        std::string target = fs::read_symlink(e.path(), ec).filename().string();
        if (target.rfind("libnccl.so.2.", 0) == 0) nccl = target.substr(11);
      }
    }
  }
  if (nccl.empty()) {
    Add(v, "pitfall-7: NCCL version", Status::kWarn, "no libnccl.so.2.x.y in " + Join(in.lib_dirs),
        "use an NGC image, which ships a tuned NCCL");
  } else {
    auto parts = Split(nccl, '.');
    int minor = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
    Add(v, "pitfall-7: NCCL version", minor >= 20 ? Status::kOk : Status::kWarn, "NCCL " + nccl,
        "multi-HCA and symmetric-memory features need NCCL 2.20 or later: update the image");
  }
  return v;
}

View TopoView(const Inputs& in) {
  View v{"topo", json::object(), {}};
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kIdentity);
  auto gpus = sysfs::DiscoverGpus(in.root);
  if (!hcas || !gpus || hcas->empty() || gpus->empty()) {
    Add(v, "pitfall-5: GPU-NIC pairing", Status::kWarn,
        "no GPUs or no HCAs visible under " + in.root.Sys(""), "");
    return v;
  }
  std::vector<std::string> ours = Ours(in);
  if (ours.empty()) {
    std::string ib = Env(in, podenv::kNcclIbHca);
    if (!ib.empty()) ours = podenv::ParseIbHca(ib).Select(Names(*hcas));
  }
  v.doc["hcaNames"] = Names(*hcas);
  v.doc["ours"] = ours;
  json matrix = json::array();
  for (const auto& g : *gpus) {
    if (!in.gpus.empty() && std::find(in.gpus.begin(), in.gpus.end(), g.address) == in.gpus.end())
      continue;
    json dist = json::array();
    std::vector<sysfs::PciDistance> ds;
    for (const auto& h : *hcas) {
      ds.push_back(sysfs::Distance(g.device_path, g.numa_node, h.device_path, h.numa_node));
      dist.push_back(std::string(sysfs::PciDistanceName(ds.back())));
    }
    sysfs::PciDistance best = *std::min_element(ds.begin(), ds.end());
    std::vector<std::string> nearest;
    for (size_t i = 0; i < hcas->size(); ++i) {
      if (ds[i] == best) nearest.push_back((*hcas)[i].name);
    }
    matrix.push_back(
        {{"gpu", g.address}, {"numaNode", g.numa_node}, {"distances", dist}, {"nearest", nearest}});
    if (!ours.empty() && std::none_of(nearest.begin(), nearest.end(), [&](const std::string& n) {
          return std::find(ours.begin(), ours.end(), n) != ours.end();
        })) {
      Add(v, "pitfall-5: GPU-NIC pairing", Status::kWarn,
          "GPU " + g.address + "'s nearest HCA (" + Join(nearest) + ") is not in this pod (" +
              Join(ours) + ")",
          "request per-HCA resources (rdma/hca) so the kubelet's topology manager pairs NUMA-local "
          "HCAs; a mismatched pair loses 30%+ bandwidth");
    }
  }
  v.doc["matrix"] = matrix;
  if (v.findings.empty())
    Add(v, "pitfall-5: GPU-NIC pairing", Status::kOk, "every GPU's nearest HCA is available");
  return v;
}

}  // namespace kuberdma::doctor
