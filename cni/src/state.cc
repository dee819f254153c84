// SPDX-License-Identifier: Apache-2.0
// State records on disk and the node-wide flock.
#include "kuberdma/cni/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"

namespace kuberdma::cni {

using nlohmann::json;

std::string EscapeName(std::string_view name) {
  std::string out;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || (c == '.' && !out.empty())) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  return out.empty() ? "%00" : out;
}

std::string_view AttachModeName(AttachMode mode) {
  switch (mode) {
    case AttachMode::kMacvlan:
      return "macvlan";
    case AttachMode::kIpvlan:
      return "ipvlan";
    case AttachMode::kVf:
      return "vf";
    case AttachMode::kIpoib:
      return "ipoib";
    case AttachMode::kMove:
      break;
  }
  return "move";
}

std::optional<AttachMode> ParseAttachMode(std::string_view name) {
  for (AttachMode m : {AttachMode::kMove, AttachMode::kMacvlan, AttachMode::kIpvlan,
                       AttachMode::kVf, AttachMode::kIpoib}) {
    if (name == AttachModeName(m)) return m;
  }
  return std::nullopt;
}

json AttachmentRecord::ToJson() const {
  json j = {{"version", version},
            {"network", network},
            {"containerID", container_id},
            {"ifname", ifname},
            {"netns", netns},
            {"done", done},
            {"mode", AttachModeName(mode)},
            {"hca", {{"name", hca}, {"address", hca_address}, {"linkLayer", link_layer}}},
            {"netdev",
             {{"moved", netdev_moved},
              {"hostName", host_name},
              {"hostIfindex", host_ifindex},
              {"mac", mac},
              {"hostMtu", host_mtu},
              {"hostAdminUp", host_admin_up}}},
            {"rdma", {{"netnsMode", rdma::NetnsModeName(netns_mode)}, {"moved", rdma_moved}}},
            {"pkey", {{"value", pkey}, {"index", pkey_index}}}};
  if (ipam) {
    j["ipam"] = {{"type", ipam->type},
                 {"config", ipam->section},
                 {"requested", ipam->requested},
                 {"result", ipam->result}};
  }
  if (vf) {
    j["vf"] = {{"pfAddress", vf->pf_address}, {"index", vf->index},      {"changed", vf->changed},
               {"before", vf->before},        {"hostMac", vf->host_mac}, {"set", vf->set},
               {"rebound", vf->rebound}};
  }
  return j;
}

namespace {

// Records are ours, but a truncated or hand-edited file must not crash DEL: read defensively.
std::string Str(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}
int64_t Num(const json& o, const char* k, int64_t dflt) {
  auto it = o.find(k);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
}
bool Flag(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}
json Sub(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_object() ? *it : json::object();
}

void ReadNetdev(const json& nd, AttachmentRecord* r) {
  r->netdev_moved = Flag(nd, "moved");
  r->host_name = Str(nd, "hostName");
  r->host_ifindex = static_cast<int>(Num(nd, "hostIfindex", 0));
  r->mac = Str(nd, "mac");
  r->host_mtu = static_cast<uint32_t>(Num(nd, "hostMtu", 0));
  r->host_admin_up = Flag(nd, "hostAdminUp");
}

std::optional<IpamState> ReadIpam(const json& j) {
  auto it = j.find("ipam");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  IpamState st{
      .type = Str(*it, "type"), .section = Sub(*it, "config"), .requested = Flag(*it, "requested")};
  if (auto res = it->find("result"); res != it->end() && res->is_object()) st.result = *res;
  return st;
}

// A record's VF part; a malformed one reads as "nothing was changed through the PF", which DEL
// then leaves alone rather than guess (the doctor shows the record as it is).
std::optional<VfRecord> ReadVf(const json& j) {
  auto it = j.find("vf");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const json& v = *it;
  VfRecord r;
  r.pf_address = Str(v, "pfAddress");
  r.index = static_cast<uint32_t>(std::max<int64_t>(0, Num(v, "index", 0)));
  r.changed = Flag(v, "changed") && !r.pf_address.empty();
  r.before = Sub(v, "before");
  r.host_mac = Str(v, "hostMac");
  r.set = Sub(v, "set");
  r.rebound = Flag(v, "rebound");
  return r;
}

}  // namespace

Result<AttachmentRecord> ReadRecord(const std::string& path) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  auto j = ParseUntrustedJson(text, "state record " + path);
  if (!j) return Fail(j.error());
  auto rec = AttachmentRecord::FromJson(*j);
  if (!rec) return Fail(rec.error().Wrap("state record " + path));
  return rec;
}

Result<AttachmentRecord> AttachmentRecord::FromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "state record is not an object");
  AttachmentRecord r;
  r.version = static_cast<int>(Num(j, "version", 0));
  if (r.version < 1 || r.version > kStateVersion) {
    return Fail(ErrorCode::kInvalidArgument, "state record version " + std::to_string(r.version) +
                                                 " is not understood (this "
                                                 "plugin reads version " +
                                                 std::to_string(kStateVersion) + ")");
  }
  r.network = Str(j, "network");
  r.container_id = Str(j, "containerID");
  r.ifname = Str(j, "ifname");
  r.netns = Str(j, "netns");
  r.done = Flag(j, "done");
  // Records older than child links have no mode: they moved the netdev.
  std::string mode = Str(j, "mode");
  auto parsed = ParseAttachMode(mode.empty() ? "move" : mode);
  if (!parsed) {
    return Fail(ErrorCode::kInvalidArgument,
                "state record mode '" + mode + "' is not move, macvlan, ipvlan or vf");
  }
  r.mode = *parsed;
  json hca = Sub(j, "hca");
  r.hca = Str(hca, "name");
  r.hca_address = Str(hca, "address");
  r.link_layer = Str(hca, "linkLayer");
  ReadNetdev(Sub(j, "netdev"), &r);
  json rd = Sub(j, "rdma");
  r.netns_mode = rdma::ParseNetnsMode(Str(rd, "netnsMode"));
  r.rdma_moved = Flag(rd, "moved");
  json pk = Sub(j, "pkey");
  r.pkey = static_cast<uint16_t>(Num(pk, "value", 0xffff));
  r.pkey_index = static_cast<int>(Num(pk, "index", -1));
  r.ipam = ReadIpam(j);
  r.vf = ReadVf(j);
  return r;
}

std::string StateStore::PathFor(const std::string& network, const std::string& container_id,
                                const std::string& ifname) const {
  return dir_ + "/" + EscapeName(network) + "/" + container_id + ":" + ifname + ".json";
}

Result<std::optional<AttachmentRecord>> StateStore::Load(const std::string& network,
                                                         const std::string& container_id,
                                                         const std::string& ifname) const {
  std::string path = PathFor(network, container_id, ifname);
  auto rec = ReadRecord(path);
  if (!rec) {
    if (rec.error().code() == ErrorCode::kNotFound) return std::optional<AttachmentRecord>{};
    return Fail(rec.error());
  }
  return std::optional<AttachmentRecord>(std::move(*rec));
}

Result<void> StateStore::Save(const AttachmentRecord& rec) const {
  KUBERDMA_TRY(MakePrivateDirs(root_, dir_ + "/" + EscapeName(rec.network)));
  auto r = WriteFileAtomic(PathFor(rec.network, rec.container_id, rec.ifname),
                           DumpJson(rec.ToJson(), 2) + "\n", 0600);
  if (!r) return Fail(r.error().Wrap("save state"));
  return {};
}

Result<void> StateStore::Remove(const std::string& network, const std::string& container_id,
                                const std::string& ifname) const {
  std::string path = PathFor(network, container_id, ifname);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return FailErrno(errno, "remove " + path);
  return {};
}

Result<std::vector<AttachmentRecord>> StateStore::List(const std::string& network,
                                                       std::vector<Error>* unreadable) const {
  std::vector<AttachmentRecord> out;
  std::vector<std::string> nets;
  if (!network.empty()) {
    nets.push_back(EscapeName(network));
  } else if (DIR* d = ::opendir(dir_.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.' && e->d_type == DT_DIR) nets.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  for (const auto& n : nets) {
    std::string sub = dir_ + "/" + n;
    DIR* d = ::opendir(sub.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> files;
    while (const dirent* e = ::readdir(d)) {
      std::string f = e->d_name;
      // Only "<containerID>:<ifname>.json" names are records; anything else is not ours.
      bool record = f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0 &&
                    f.find(':') != std::string::npos;
      if (record) files.push_back(f);
    }
    ::closedir(d);
    for (const auto& f : files) {
      auto rec = ReadRecord(sub + "/" + f);
      // Gone: removed by a concurrent DEL of another network, not ours to mind.
      if (!rec && rec.error().code() == ErrorCode::kNotFound) continue;
      if (!rec && unreadable == nullptr) return Fail(rec.error());
      if (!rec) {
        unreadable->push_back(rec.error());
        continue;
      }
      out.push_back(std::move(*rec));
    }
  }
  return out;
}

bool StateStore::Exists() const {
  struct stat st {};
  return ::stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<void> StateStore::CheckWritable() const {
  KUBERDMA_TRY(MakePrivateDirs(root_, dir_));
  if (::access(dir_.c_str(), W_OK) != 0) return FailErrno(errno, "state directory " + dir_);
  return {};
}

Result<NodeLock> NodeLock::Acquire(const std::string& dir, uint32_t timeout_ms,
                                   const std::string& root) {
  KUBERDMA_TRY(MakePrivateDirs(root.empty() ? dir : root, dir));
  std::string path = dir + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return FailErrno(errno, "open lock " + path);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto backoff = std::chrono::microseconds(200);
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return NodeLock(std::move(fd));
    if (errno != EWOULDBLOCK && errno != EINTR) return FailErrno(errno, "lock " + path);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(ErrorCode::kBusy, "node lock " + path + " is still held after " +
                                        std::to_string(timeout_ms) +
                                        " ms by another rdma CNI call; try again later");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(5000));
  }
}

}  // namespace kuberdma::cni
