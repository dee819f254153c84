// SPDX-License-Identifier: Apache-2.0
// The DRA driver beside the device plugin: slices kept on the API server, the kubelet plugin
// (driver.h).
#include "kuberdma/dra/driver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "kuberdma/base/files.h"
#include "kuberdma/base/log_text.h"
#include "kuberdma/contract/allocation.h"

namespace kuberdma::dra {

namespace {

using json = nlohmann::json;

// `s` with every byte outside [A-Za-z0-9.-] percent-encoded: a query value.
std::string QueryEscape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '.' || c == '-') {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

std::string ListPath(const std::string& driver, const std::string& node) {
  std::string selector = "spec.driver=" + driver;
  if (!node.empty()) selector += ",spec.nodeName=" + node;
  return std::string(kSlicesPath) + "?fieldSelector=" + QueryEscape(selector);
}

// Whether an item of the API server's list is a slice this code can read: the API server is
// trusted to answer, not to answer well (a proxy, a newer version, a truncated body).
bool Readable(const json& item) {
  return item.is_object() && item.contains("metadata") && item["metadata"].is_object() &&
         item["metadata"].contains("name") && item["metadata"]["name"].is_string() &&
         item.contains("spec") && item["spec"].is_object() && item["spec"].contains("pool") &&
         item["spec"]["pool"].is_object() && item["spec"]["pool"].contains("name") &&
         item["spec"]["pool"]["name"].is_string();
}

// Of a Readable() slice.
std::string PoolOf(const json& slice) { return slice["spec"]["pool"]["name"]; }

// What a slice says, less what the API server (a taint's timeAdded) or the generation adds.
json Content(const json& slice) {
  json spec = slice.value("spec", json::object());
  if (spec.contains("pool") && spec["pool"].is_object()) spec["pool"].erase("generation");
  if (spec.contains("devices") && spec["devices"].is_array()) {
    for (auto& d : spec["devices"]) {
      if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
      for (auto& t : d["taints"]) {
        if (t.is_object()) t.erase("timeAdded");
      }
    }
  }
  const json meta = slice.value("metadata", json::object());
  return json{{"spec", spec},
              {"labels", meta.value("labels", json::object())},
              {"owners", meta.value("ownerReferences", json::array())}};
}

// The pools whose slices differ between `have` and `want` (by name), and each pool's highest
// generation on the API server.
std::set<std::string> ChangedPools(const std::map<std::string, json>& have,
                                   const std::vector<json>& want,
                                   std::map<std::string, int64_t>* generation) {
  std::set<std::string> changed;
  std::set<std::string> wanted;
  for (const auto& [name, s] : have) {
    const json& g_value = s["spec"]["pool"].value("generation", json(0));
    int64_t g = g_value.is_number_integer() ? g_value.get<int64_t>() : 0;
    auto& top = (*generation)[PoolOf(s)];
    top = std::max(top, g);
  }
  for (const auto& s : want) {
    std::string name = s["metadata"]["name"];
    wanted.insert(name);
    auto it = have.find(name);
    if (it == have.end() || Content(it->second) != Content(s) || PoolOf(it->second) != PoolOf(s)) {
      changed.insert(PoolOf(s));
    }
  }
  for (const auto& [name, s] : have) {
    if (!wanted.contains(name)) changed.insert(PoolOf(s));
  }
  return changed;
}

bool HasTaints(const json& slice) {
  const json& devices = slice.value("spec", json::object()).value("devices", json::array());
  return std::ranges::any_of(devices, [](const json& d) {
    return d.is_object() && d.contains("taints") && !d["taints"].empty();
  });
}

}  // namespace

void OwnBy(std::vector<json>& slices, const std::string& node, const std::string& node_uid) {
  if (node_uid.empty()) return;
  for (auto& s : slices) {
    s["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                     {"kind", "Node"},
                                                     {"name", node},
                                                     {"uid", node_uid},
                                                     {"controller", true}}});
  }
}

std::string SyncCounts::Text() const {
  return "created " + std::to_string(created) + ", updated " + std::to_string(updated) +
         ", deleted " + std::to_string(deleted) + ", unchanged " + std::to_string(unchanged);
}

namespace {

// Creates `s`, or replaces the listed slice of its name (taken out of `have`), counting in `n`.
Result<void> WriteSlice(const ApiServer& api, json& s, std::map<std::string, json>& have,
                        SyncCounts& n) {
  const std::string name = s["metadata"]["name"];
  auto it = have.find(name);
  Result<json> stored = json();
  if (it == have.end()) {
    stored = Request(api, {.method = "POST", .path = kSlicesPath, .body = s.dump()});
    KUBERDMA_TRY(stored);
    ++n.created;
  } else {
    const json& version = it->second["metadata"].value("resourceVersion", json(""));
    s["metadata"]["resourceVersion"] = version.is_string() ? version : json("");
    stored = Request(
        api, {.method = "PUT", .path = std::string(kSlicesPath) + "/" + name, .body = s.dump()});
    KUBERDMA_TRY(stored);
    ++n.updated;
    have.erase(it);
  }
  n.taints_dropped = n.taints_dropped || (HasTaints(s) && !HasTaints(*stored));
  return {};
}

}  // namespace

Result<SyncCounts> SyncSlices(const ApiServer& api, const std::string& driver,
                              const std::string& node, std::vector<json> desired) {
  KUBERDMA_ASSIGN_OR_RETURN(json list, Get(api, ListPath(driver, node)));
  std::map<std::string, json> have;
  const json& items = list.is_object() ? list.value("items", json::array()) : json::array();
  for (const auto& item : items.is_array() ? items : json::array()) {
    if (Readable(item)) have[item["metadata"]["name"].get<std::string>()] = item;
  }
  std::map<std::string, int64_t> generation;
  std::set<std::string> changed = ChangedPools(have, desired, &generation);
  SyncCounts n;
  for (auto& s : desired) {
    std::string pool = PoolOf(s);
    if (!changed.contains(pool)) {
      ++n.unchanged;
      continue;
    }
    s["spec"]["pool"]["generation"] = generation[pool] + 1;
    KUBERDMA_TRY(WriteSlice(api, s, have, n));
  }
  for (const auto& s : desired) have.erase(s["metadata"]["name"].get<std::string>());
  for (const auto& [name, s] : have) {
    auto gone = Request(api, {.method = "DELETE", .path = std::string(kSlicesPath) + "/" + name});
    if (!gone && gone.error().code() != ErrorCode::kNotFound) return Fail(gone.error());
    ++n.deleted;
  }
  return n;
}

Driver::Driver(Options o, ApiServer api) : o_(std::move(o)), api_(std::move(api)), claims_(api_) {
  thread_ = std::thread([this] { Loop(); });
  if (o_.watch) watcher_ = std::thread([this] { WatchLoop(); });
}

void Driver::Kick(const char* why) {
  std::lock_guard l(mu_);
  if (desired_text_.empty()) return;  // nothing scanned yet: the first scan writes
  spdlog::info("event=dra_republish reason={}", LogQuoted(why));
  dirty_ = true;
  cv_.notify_all();
}

void Driver::WatchLoop() {
  auto stopping = [this] {
    std::lock_guard l(mu_);
    return stop_;
  };
  std::string path =
      ListPath(o_.publish.driver, o_.publish.node) + "&watch=true&timeoutSeconds=300";
  while (!stopping()) {
    auto done = Watch(
        api_, path,
        [this](const json& event) {
          // A slice of this node deleted by someone else (the kubelet wipes them when it starts,
          // an admin, a namespace clean-up): write it back now rather than at the resync.
          if (event.is_object() && event.value("type", "") == "DELETED")
            Kick("a slice was deleted");
        },
        stopping);
    if (!done)
      spdlog::warn("event=dra_watch_failed error={} (watching again)",
                   LogQuoted(done.error().message()));
    std::unique_lock l(mu_);
    cv_.wait_for(l, done ? std::chrono::milliseconds(100) : o_.watch_retry, [&] { return stop_; });
  }
}

Driver::~Driver() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (watcher_.joinable()) watcher_.join();
  server_.reset();
}

std::shared_ptr<deviceplugin::SharedResource> Driver::Pick(
    const std::map<std::string, std::shared_ptr<deviceplugin::SharedResource>>& res) const {
  for (const auto& [name, shared] : res) {
    std::lock_guard lock(shared->mu);
    const auto& cfg = shared->resource.config();
    if (cfg.policy != deviceplugin::Policy::kPerHca) continue;
    if (o_.resource.empty() || o_.resource == name || o_.resource == cfg.resource_name) {
      return shared;
    }
  }
  return nullptr;
}

void Driver::StartServer(std::shared_ptr<deviceplugin::SharedResource> shared) {
  server_.reset();  // its sockets first: the new one binds the same paths
  std::string dir = o_.plugins_dir + "/" + o_.publish.driver;
  for (const auto& d : {dir, o_.registry_dir, o_.cdi_dir}) {
    if (auto made = MakeDirs(d); !made) {
      spdlog::error("event=dra_start_failed error={}", LogQuoted(made.error().message()));
      return;
    }
  }
  auto s = DraServer::Start(
      shared, o_.publish, o_.cdi_dir, claims_,
      {.driver = o_.publish.driver,
       .dra_socket = dir + "/dra.sock",
       .registration_socket = o_.registry_dir + "/" + o_.publish.driver + "-reg.sock",
       .on_registered = [this] { Kick("the kubelet registered the plugin"); }});
  if (!s) {
    spdlog::error("event=dra_start_failed error={}", LogQuoted(s.error().message()));
    return;
  }
  server_ = std::move(*s);
  serving_ = std::move(shared);
  spdlog::info("event=dra_serving driver={} socket={}/dra.sock", o_.publish.driver, dir);
}

void Driver::OnRescan(
    const std::map<std::string, std::shared_ptr<deviceplugin::SharedResource>>& res,
    const rails::NodeRoles* roles) {
  auto shared = Pick(res);
  if (shared == nullptr) {
    spdlog::warn(
        "event=dra_no_resource resource={} (the DRA driver publishes a per-HCA "
        "resource: add one with \"policy\": \"per-hca\" to the config)",
        LogQuoted(o_.resource));
    return;
  }
  if (shared != serving_) StartServer(shared);
  Result<Published> published = Fail(ErrorCode::kInternal, "not computed");
  PublishOptions publish = WithVerdicts(shared->allocations_dir);
  publish.omit_tainted = omit_tainted_;
  {
    std::lock_guard lock(shared->mu);
    published = ResourceSlices(shared->resource, publish, roles);
  }
  if (!published) {
    spdlog::error("event=dra_slices_failed error={}", LogQuoted(published.error().message()));
    return;
  }
  if (server_ != nullptr) server_->SetHealth(published->states);
  RecordTaintsFor(shared->allocations_dir, published->states);
  std::string text = json(published->objects).dump();
  std::lock_guard l(mu_);
  status_.serving = server_ != nullptr;
  if (text == desired_text_) return;
  desired_ = std::move(published->objects);
  desired_text_ = std::move(text);
  status_.devices = published->devices;
  dirty_ = true;
  cv_.notify_all();
}

void Driver::RecordTaintsFor(const std::string& dir, const std::vector<DeviceState>& devices) {
  if (dir.empty()) return;
  std::vector<contract::TaintRecord> taints;
  for (const auto& d : devices) {
    for (const auto& t : d.taints) {
      taints.push_back(
          {.device = d.device, .hca = d.hca, .key = t.key, .value = t.value, .effect = t.effect});
    }
  }
  if (taints == recorded_taints_ && taints_written_) return;
  if (auto done = contract::RecordTaints(dir, taints); !done) {
    spdlog::warn("event=dra_taints_unrecorded error={}", LogQuoted(done.error().message()));
    return;
  }
  for (const auto& t : taints) {
    bool was = std::ranges::find(recorded_taints_, t) != recorded_taints_.end();
    if (!was) {
      spdlog::warn("event=dra_device_tainted device={} hca={} taint={}={}:{}", t.device, t.hca,
                   t.key, t.value, t.effect);
    }
  }
  recorded_taints_ = std::move(taints);
  taints_written_ = true;
}

PublishOptions Driver::WithVerdicts(const std::string& dir) {
  PublishOptions o = o_.publish;
  if (dir.empty()) return o;
  // Each rail's switch as the LLDP watch last heard it (--lldp): the leaf attribute.
  if (auto cabling = contract::ListCabling(dir)) {
    for (const auto& r : *cabling) o.leaves[r.hca] = r.switch_name;
  }
  auto verdicts = contract::ListVerdicts(dir);
  if (!verdicts) {
    if (verdicts.error().code() != ErrorCode::kNotFound && !verdicts_warned_) {
      spdlog::warn("event=dra_verdicts_unreadable error={}", LogQuoted(verdicts.error().message()));
      verdicts_warned_ = true;
    }
    return o;
  }
  verdicts_warned_ = false;
  for (const auto& v : *verdicts) o.acceptance[v.hca] = {v.why, v.effect};
  return o;
}

std::string Driver::NodeUid() {
  if (!node_uid_.empty() || o_.publish.node.empty()) return node_uid_;
  auto node = Get(api_, "/api/v1/nodes/" + o_.publish.node);
  const json uid = node ? node->value("metadata", json::object()).value("uid", json()) : json();
  if (uid.is_string()) {
    node_uid_ = uid.get<std::string>();
  } else if (!node_warned_) {
    node_warned_ = true;
    spdlog::warn(
        "event=dra_no_node_owner node={} error={} (slices are written without the Node as "
        "owner, so a deleted node's slices stay; the chart's ClusterRole grants get on nodes)",
        o_.publish.node, LogQuoted(node ? "no metadata.uid" : node.error().message()));
  }
  return node_uid_;
}

Result<SyncCounts> Driver::SyncOnce(std::vector<nlohmann::json> want) {
  try {
    OwnBy(want, o_.publish.node, NodeUid());
    return SyncSlices(api_, o_.publish.driver, o_.publish.node, std::move(want));
  } catch (const std::exception& e) {  // a body of unexpected shape: retried like a failure
    return Fail(ErrorCode::kInvalidArgument, std::string("the API server's answer: ") + e.what());
  }
}

void Driver::Loop() {
  std::unique_lock l(mu_);
  while (!stop_) {
    cv_.wait_for(l, o_.resync, [&] { return stop_ || dirty_; });
    if (stop_) return;
    if (desired_text_.empty()) continue;  // nothing scanned yet
    dirty_ = false;
    auto want = desired_;
    l.unlock();
    Result<SyncCounts> done = SyncOnce(std::move(want));
    l.lock();
    if (done && done->taints_dropped && !omit_tainted_) {
      // Kubernetes before device taints, or DRADeviceTaints off: an unhealthy device would be
      // published as healthy. Leave them out instead, as the scheduler then cannot be told.
      omit_tainted_ = true;
      spdlog::warn(
          "event=dra_taints_dropped (the API server dropped the device taints: DRADeviceTaints is "
          "off; unhealthy devices are left out of the slices instead, from the next scan on)");
    }
    if (done) {
      ++status_.syncs;
      status_.last_error.clear();
      if (done->created + done->updated + done->deleted > 0) {
        spdlog::info("event=dra_slices_written node={} {}", o_.publish.node, done->Text());
      }
    } else {
      status_.last_error = done.error().message();
      spdlog::warn("event=dra_slices_failed error={} (retrying)", LogQuoted(status_.last_error));
      // Sooner than the resync: the API server may be back in a few seconds.
      dirty_ = true;
      cv_.wait_for(l, std::chrono::seconds(2), [&] { return stop_; });
    }
    cv_.notify_all();
  }
}

Driver::Status Driver::status() const {
  std::lock_guard l(mu_);
  return status_;
}

bool Driver::WaitFor(const std::function<bool(const Status&)>& pred,
                     std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  return cv_.wait_for(l, timeout, [&] { return pred(status_); });
}

}  // namespace kuberdma::dra
