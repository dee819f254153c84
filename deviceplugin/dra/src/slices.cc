// SPDX-License-Identifier: Apache-2.0
// The node's HCAs as resource.k8s.io/v1 ResourceSlices (slices.h).
#include "kuberdma/dra/slices.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "kuberdma/base/hash.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::dra {

using nlohmann::json;

namespace {

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::ranges::all_of(s, [](char c) {
    auto u = static_cast<unsigned char>(c);
    return std::islower(u) != 0 || std::isdigit(u) != 0 || c == '-';
  });
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t at = 0;
  while (at <= s.size()) {
    size_t dot = s.find('.', at);
    if (!IsDnsLabel(s.substr(at, dot == std::string::npos ? std::string::npos : dot - at)))
      return false;
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return true;
}

bool IsCIdentifier(const std::string& s) {
  if (s.empty() || s.size() > kMaxIdentifier ||
      std::isdigit(static_cast<unsigned char>(s.front())) != 0)
    return false;
  return std::ranges::all_of(
      s, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

}  // namespace

std::string PcieRoot(const std::string& device_path) { return sysfs::PcieRootOf(device_path); }

namespace {

// A device's attributes, kept within the API's limits; what does not fit is said in `dropped`.
class Attributes {
 public:
  Attributes(std::string device, std::vector<std::string>* dropped)
      : device_(std::move(device)), dropped_(dropped) {}
  // `always`: published empty too (an attribute selectors may name).
  void String(const std::string& name, const std::string& v, bool always = false) {
    if (v.empty() && !always) return;
    if (v.size() > kMaxStringValue) {
      dropped_->push_back(device_ + ": " + name + " (" + std::to_string(v.size()) +
                          " characters, the API takes 64)");
      return;
    }
    Put(name, {{"string", v}});
  }
  void Int(const std::string& name, int64_t v) { Put(name, {{"int", v}}); }
  json Take() { return std::move(attrs_); }

 private:
  void Put(const std::string& name, json v) {
    if (!IsQualifiedName(name)) {
      dropped_->push_back(device_ + ": " + name + " (not a qualified name)");
    } else if (attrs_.size() >= kMaxAttributesPerDevice) {
      dropped_->push_back(device_ + ": " + name + " (over 32 attributes)");
    } else {
      attrs_[name] = std::move(v);
    }
  }
  std::string device_;
  std::vector<std::string>* dropped_;
  json attrs_ = json::object();
};

// A switch name as an attribute value: whole when it fits, else its head and a hash of the whole
// (two long names never meet as one leaf; a selector on leaf never meets a missing attribute).
std::string LeafValue(const std::string& name) {
  if (name.size() <= kMaxStringValue) return name;
  return name.substr(0, kMaxStringValue - 9) + "-" + ShortHash(name);
}

json DeviceOf(const deviceplugin::Resource& r, const PublishOptions& o,
              const deviceplugin::HcaHealth& h, const sysfs::Port& port, int rail,
              const std::vector<DeviceTaint>& taints, Published& out) {
  const sysfs::Hca& hca = h.hca;
  std::string name = DeviceName(hca.name, port.number, hca.ports.size() > 1);
  Attributes a(name, &out.dropped);
  const std::string ours = o.driver + "/";
  a.String("resource.kubernetes.io/pcieRoot", PcieRoot(hca.device_path));
  a.String("resource.kubernetes.io/pciBusID", hca.pci_address);
  if (hca.numa_node >= 0) a.Int("resource.kubernetes.io/numaNode", hca.numa_node);
  a.String(ours + "rdmaDevice", hca.name);
  a.Int(ours + "port", port.number);
  // netdev, linkLayer, rateGbps, rail and firmware are on every device (an empty string, 0 where
  // the node has no value), so a selector on them never meets a device without them: a real
  // scheduler fails the whole allocation on a missing attribute (docs/dra.md).
  a.String(ours + "netdev",
           port.netdev.empty() && !hca.netdevs.empty() ? hca.netdevs.front() : port.netdev, true);
  a.String(ours + "linkLayer", std::string(sysfs::LinkLayerName(port.link_layer)), true);
  a.Int(ours + "rateGbps", port.rate_gbps > 0 ? std::llround(port.rate_gbps) : 0);
  a.Int(ours + "rail", std::max(rail, 0));
  a.String(ours + "firmware", hca.fw_version, true);
  a.String(ours + "pciAddress", hca.pci_address);
  // On every device, so a selector on it never meets a device without it: "pf" (a whole HCA,
  // a scalable function's parent included) or "vf"; a VF also names its PF.
  a.String(ours + "function", hca.pf_address.empty() ? "pf" : "vf");
  if (!hca.pf_address.empty()) a.String(ours + "pfPciAddress", hca.pf_address);
  if (o.netns_mode) a.String(ours + "netnsMode", std::string(rdma::NetnsModeName(*o.netns_mode)));
  auto leaf = o.leaves.find(hca.name);
  a.String(ours + "leaf", leaf == o.leaves.end() ? "" : LeafValue(leaf->second), true);
  a.String("k8s.cni.cncf.io/deviceID", hca.pci_address.empty() ? hca.name : hca.pci_address);
  a.String("k8s.cni.cncf.io/resourceName", r.config().FullName());
  out.devices.push_back(name);
  json device = {{"name", name}, {"attributes", a.Take()}};
  for (const auto& t : taints) {
    device["taints"].push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  return device;
}

// "<node>-<resource>-<i>-<hash of driver, node, resource, i>": readable, and two drivers, or a
// node "a-b" with resource "c" and a node "a" with resource "b-c", never name the same slice.
std::string SliceName(const PublishOptions& o, const std::string& resource, size_t i) {
  std::string readable = o.node + "-" + resource + "-" + std::to_string(i);
  std::string hash = ShortHash(o.driver + "/" + o.node + "/" + resource + "/" + std::to_string(i));
  readable = readable.substr(0, 253 - 1 - hash.size());
  while (!readable.empty() && (readable.back() == '-' || readable.back() == '.'))
    readable.pop_back();
  return readable + "-" + hash;
}

// Slice `i` of `count`: devices [128 i, 128 (i + 1)) of the pool.
json Slice(const deviceplugin::Resource& r, const PublishOptions& o, const json& devices, size_t i,
           size_t count) {
  json part = json::array();
  for (size_t k = i * kMaxDevicesPerSlice; k < devices.size() && k < (i + 1) * kMaxDevicesPerSlice;
       ++k)
    part.push_back(devices[k]);
  std::string resource = DeviceName(r.config().resource_name, 0, false);
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata",
           {{"name", SliceName(o, resource, i)},
            {"labels", {{"app.kubernetes.io/managed-by", "kube-rdma"}}}}},
          {"spec",
           {{"driver", o.driver},
            {"nodeName", o.node},
            // A pool per resource: a node's HCAs may be in the per-HCA resources of several.
            {"pool",
             {{"name", o.node + "/" + resource},
              {"generation", o.generation},
              {"resourceSliceCount", static_cast<int64_t>(count)}}},
            {"devices", part}}}};
}

}  // namespace

std::string TaintValue(const std::string& why) {
  std::string out;
  for (char c : why) {
    auto u = static_cast<unsigned char>(c);
    bool ok = std::isalnum(u) != 0 || c == '.' || c == '_' || c == '-';
    if (!ok && (out.empty() || out.back() == '-')) continue;
    out += ok ? c : '-';
    if (out.size() == 63) break;
  }
  while (!out.empty() && std::isalnum(static_cast<unsigned char>(out.back())) == 0) out.pop_back();
  while (!out.empty() && std::isalnum(static_cast<unsigned char>(out.front())) == 0)
    out.erase(out.begin());
  return out;
}

namespace {

// The highest rate among `r`'s ACTIVE ports of `layer`: what a port of it should train to.
double BestRate(const deviceplugin::Resource& r, sysfs::LinkLayer layer) {
  double best = 0;
  for (const auto& [name, h] : r.hcas()) {
    if (!h.present) continue;
    for (const auto& p : h.hca.ports) {
      if (p.state == sysfs::kPortActive && p.link_layer == layer)
        best = std::max(best, p.rate_gbps);
    }
  }
  return best;
}

std::vector<DeviceTaint> HealthTaints(const deviceplugin::Resource& r, const PublishOptions& o,
                                      const deviceplugin::HcaHealth& h, const sysfs::Port& p) {
  const std::string ours = o.driver + "/";
  if (!h.present) return {{ours + kTaintNodeNic, TaintValue(h.reason), o.taint_effect}};
  if (p.state != sysfs::kPortActive) {
    std::string state = p.state_name.empty() ? "DOWN" : p.state_name;
    return {{ours + kTaintLinkDown, TaintValue("port-" + std::to_string(p.number) + "-" + state),
             o.taint_effect}};
  }
  if (!h.healthy && !h.reason.starts_with("port ")) {
    return {{ours + kTaintUnhealthy, TaintValue(h.reason), o.taint_effect}};
  }
  double best = BestRate(r, p.link_layer);
  if (p.rate_gbps > 0 && p.rate_gbps < best) {
    return {{ours + kTaintDegraded,
             TaintValue("rate-" + std::to_string(std::llround(p.rate_gbps)) + "-of-" +
                        std::to_string(std::llround(best)) + "gbps"),
             "None"}};
  }
  return {};
}

// The device's health taints, and the fleet acceptance's verdict on its HCA.
std::vector<DeviceTaint> TaintsOf(const deviceplugin::Resource& r, const PublishOptions& o,
                                  const deviceplugin::HcaHealth& h, const sysfs::Port& p) {
  auto taints = HealthTaints(r, o, h, p);
  if (auto v = o.acceptance.find(h.hca.name); v != o.acceptance.end()) {
    std::string why = TaintValue(v->second.first);
    taints.push_back(
        {o.driver + "/" + kTaintAcceptance, why.empty() ? "slow" : why, v->second.second});
  }
  return taints;
}

}  // namespace

std::vector<DeviceState> DeviceStates(const deviceplugin::Resource& r, const PublishOptions& o) {
  std::vector<DeviceState> out;
  std::string pool = o.node + "/" + DeviceName(r.config().resource_name, 0, false);
  for (const auto& [name, h] : r.hcas()) {
    // A gone HCA is not published; one the node took (an address or route on it) is, tainted,
    // so the scheduler and `kubectl get resourceslices` say why it is not offered.
    if (!h.present && !h.node_own) continue;
    for (const auto& p : h.hca.ports) {
      out.push_back({.pool = pool,
                     .device = DeviceName(name, p.number, h.hca.ports.size() > 1),
                     .hca = name,
                     .port = p.number,
                     .taints = TaintsOf(r, o, h, p)});
    }
  }
  return out;
}

bool DeviceState::Healthy() const {
  return std::ranges::none_of(taints, [](const DeviceTaint& t) { return t.effect != "None"; });
}

std::string DeviceName(const std::string& hca, uint32_t port, bool several_ports) {
  std::string out;
  for (char c : hca) {
    auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) != 0 ? static_cast<char>(std::tolower(u)) : '-';
  }
  if (several_ports) out += "-p" + std::to_string(port);
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.substr(0, 63);
}

bool IsQualifiedName(const std::string& name) {
  auto slash = name.find('/');
  if (slash == std::string::npos) return IsCIdentifier(name);
  return slash <= 63 && IsDnsSubdomain(name.substr(0, slash)) &&
         IsCIdentifier(name.substr(slash + 1));
}

Result<Published> ResourceSlices(const deviceplugin::Resource& r, const PublishOptions& o,
                                 const rails::NodeRoles* roles) {
  if (!IsDnsSubdomain(o.node)) {
    return Fail(ErrorCode::kInvalidArgument,
                "the node name '" + o.node + "' is not a DNS subdomain (--node-name)");
  }
  if (!IsDnsSubdomain(o.driver)) {
    return Fail(ErrorCode::kInvalidArgument,
                "the DRA driver name '" + o.driver + "' is not a DNS subdomain");
  }
  Published out;
  json devices = json::array();
  out.states = DeviceStates(r, o);
  for (const auto& st : out.states) {
    if (o.omit_tainted && !st.Healthy()) continue;
    const auto& h = r.hcas().at(st.hca);
    const rails::HcaRole* role = roles != nullptr ? roles->Find(st.hca) : nullptr;
    for (const auto& p : h.hca.ports) {
      if (p.number != st.port) continue;
      devices.push_back(DeviceOf(r, o, h, p, role != nullptr ? role->rail : 0, st.taints, out));
    }
  }
  size_t count =
      std::max<size_t>(1, (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice);
  for (size_t i = 0; i < count; ++i) out.objects.push_back(Slice(r, o, devices, i, count));
  return out;
}

}  // namespace kuberdma::dra
