// SPDX-License-Identifier: Apache-2.0
// The stand-in API server (api_standin.h).
#include "kuberdma/standins/api_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "kuberdma/sock/stream.h"

namespace kuberdma::standins {

namespace {

using json = nlohmann::json;

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// "spec.driver=x,spec.nodeName=y" -> {spec.driver: x, spec.nodeName: y}
std::map<std::string, std::string> FieldSelector(const std::string& query) {
  std::map<std::string, std::string> out;
  auto at = query.find("fieldSelector=");
  if (at == std::string::npos) return out;
  std::string sel = Unescape(query.substr(at + 14, query.find('&', at) - at - 14));
  size_t pos = 0;
  while (pos < sel.size()) {
    size_t end = sel.find(',', pos);
    if (end == std::string::npos) end = sel.size();
    std::string kv = sel.substr(pos, end - pos);
    auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

bool Matches(const json& obj, const std::map<std::string, std::string>& sel) {
  return std::ranges::all_of(sel, [&](const auto& kv) {
    std::string key = kv.first.substr(kv.first.find('.') + 1);
    return obj.value("spec", json::object()).value(key, std::string()) == kv.second;
  });
}

std::string ReadRequest(int c, std::string* body) {
  std::string req;
  char b[8192];
  size_t head_end = std::string::npos;
  while ((head_end = req.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = ::recv(c, b, sizeof b, 0);
    if (n <= 0) return req;
    req.append(b, static_cast<size_t>(n));
  }
  size_t length = 0;
  auto cl = req.find("Content-Length: ");
  if (cl != std::string::npos && cl < head_end) length = std::stoul(req.substr(cl + 16));
  *body = req.substr(head_end + 4);
  while (body->size() < length) {
    ssize_t n = ::recv(c, b, sizeof b, 0);
    if (n <= 0) break;
    body->append(b, static_cast<size_t>(n));
  }
  return req.substr(0, head_end);
}

}  // namespace

ApiStandIn::ApiStandIn() {
  // On loopback with port 0 this does not fail short of running out of descriptors, when the
  // first request a test makes fails and names it.
  auto l = sock::ListenTcp("127.0.0.1", 0);
  if (l) {
    port_ = sock::LocalPort(l->get()).value_or(0);
    fd_ = l->Release();
  }
  thread_ = std::thread([this] { Loop(); });
}

ApiStandIn::~ApiStandIn() {
  stop_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  thread_.join();
  for (const auto& w : watchers_) ::close(w.fd);
}

void ApiStandIn::AddToken(const std::string& token, Identity who) {
  std::lock_guard l(mu_);
  tokens_[token] = std::move(who);
}

void ApiStandIn::RestrictSlicesToNode(const std::string& user) {
  std::lock_guard l(mu_);
  restricted_user_ = user;
}

int ApiStandIn::watchers() const {
  std::lock_guard l(mu_);
  return static_cast<int>(watchers_.size());
}

void ApiStandIn::AddWatcher(int c, const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  std::string query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  (void)::send(c, head.data(), head.size(), MSG_NOSIGNAL);
  std::lock_guard l(mu_);
  watchers_.push_back({c, path + "/", FieldSelector(query)});
}

void ApiStandIn::Notify(const char* type, const std::string& path, const json& obj) {
  std::string line = json{{"type", type}, {"object", obj}}.dump() + "\n";
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", line.size());
  std::string chunk = size + line + "\r\n";
  std::erase_if(watchers_, [&](const Watcher& w) {
    if (!path.starts_with(w.prefix) || path.find('/', w.prefix.size()) != std::string::npos ||
        !Matches(obj, w.selector)) {
      return false;
    }
    if (::send(w.fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(chunk.size()))
      return false;
    ::close(w.fd);  // the watcher went away
    return true;
  });
}

std::optional<ApiStandIn::Reply> ApiStandIn::Admit(const std::string& method,
                                                   const std::string& path, const std::string& body,
                                                   const std::string& headers) const {
  if (restricted_user_.empty() || path.find("/resourceslices") == std::string::npos ||
      (method != "POST" && method != "PUT" && method != "DELETE")) {
    return std::nullopt;
  }
  std::string token;
  if (auto at = headers.find("Authorization: Bearer "); at != std::string::npos) {
    token = headers.substr(at + 22, headers.find("\r\n", at) - at - 22);
  }
  auto who = tokens_.find(token);
  if (who == tokens_.end() || who->second.user != restricted_user_) return std::nullopt;
  json obj = json::parse(body, nullptr, false);
  if (method == "DELETE") {
    auto it = objects_.find(path);
    obj = it == objects_.end() ? json::object() : it->second;
  }
  std::string node = obj.is_object() ? obj.value("spec", json::object()).value("nodeName", "") : "";
  const std::string& mine = who->second.node;
  if (mine.empty()) {
    return Status(403, "Forbidden",
                  "no node association found for user, this user must run in a pod on a node");
  }
  if (node != mine) {
    return Status(
        403, "Forbidden",
        "this user running on node '" + mine + "' may not modify " +
            (node.empty() ? "cluster resourceslices" : "resourceslices on node '" + node + "'"));
  }
  return std::nullopt;
}

ApiStandIn::Reply ApiStandIn::Answer(const std::string& method, const std::string& target,
                                     const std::string& body, const std::string& head) {
  std::optional<Reply> refused;
  {
    std::lock_guard l(mu_);
    refused = Admit(method, target.substr(0, target.find('?')), body, head);
  }
  if (refused) return *refused;
  if (fail_next > 0) {
    --fail_next;
    return Status(503, "ServiceUnavailable", "the stand-in is restarting");
  }
  return Handle(method, target, body);
}

void ApiStandIn::Loop() {
  while (!stop_) {
    int c = sock::Accept(fd_).Release();
    if (c < 0) continue;
    std::string body;
    std::string head = ReadRequest(c, &body);
    auto sp1 = head.find(' ');
    auto sp2 = head.find(' ', sp1 + 1);
    Reply r{400, json::object()};
    if (sp1 != std::string::npos && sp2 != std::string::npos) {
      std::string method = head.substr(0, sp1);
      std::string target = head.substr(sp1 + 1, sp2 - sp1 - 1);
      {
        std::lock_guard l(mu_);
        log_.push_back(method + " " + target);
        last_headers_ = head;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
      if (method == "GET" && target.find("watch=true") != std::string::npos && fail_next == 0) {
        AddWatcher(c, target);
        continue;
      }
      r = Answer(method, target, body, head);
    }
    std::string text = r.body.dump();
    std::string out =
        "HTTP/1.1 " + std::to_string(r.status) +
        " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
        "\r\nConnection: close\r\n\r\n" + text;
    (void)::send(c, out.data(), out.size(), MSG_NOSIGNAL);
    ::close(c);
  }
}

ApiStandIn::Reply ApiStandIn::Status(int code, const std::string& reason,
                                     const std::string& message) {
  return {code, json{{"kind", "Status"},
                     {"apiVersion", "v1"},
                     {"status", "Failure"},
                     {"reason", reason},
                     {"message", message},
                     {"code", code}}};
}

ApiStandIn::Reply ApiStandIn::Handle(const std::string& method, const std::string& target,
                                     const std::string& body) {
  std::string path = target.substr(0, target.find('?'));
  std::string query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
  std::string item = path;
  if (item.size() > 7 && item.ends_with("/status")) item.resize(item.size() - 7);
  std::lock_guard l(mu_);
  if (drop_device_taints && path.find("/resourceslices") != std::string::npos &&
      (method == "POST" || method == "PUT")) {
    json obj = json::parse(body, nullptr, false);
    if (obj.is_object() && obj.contains("spec") && obj["spec"].contains("devices")) {
      for (auto& d : obj["spec"]["devices"]) d.erase("taints");
      return method == "POST" ? Create(path, obj.dump()) : Replace(item, obj.dump());
    }
  }
  if (method == "POST") return Create(path, body);
  if (method == "PUT" && item.starts_with("/api/v1/namespaces/") &&
      item.find("/pods/") != std::string::npos &&
      json::parse(body, nullptr, false).is_discarded()) {
    // client-go writing a pod's status in protobuf (Multus' network-status): taken, not stored.
    auto pod = objects_.find(item);
    if (pod == objects_.end()) return Status(404, "NotFound", item + " not found");
    return {200, pod->second};
  }
  if (method == "PUT") return Replace(item, body);
  if (method == "PATCH") return Patch(item, body);
  if (method == "DELETE") return Delete(item);
  if (method != "GET") return Status(405, "MethodNotAllowed", method);
  if (auto it = objects_.find(item); it != objects_.end()) return {200, it->second};
  if (path.ends_with("resourceslices") || path.ends_with("resourceclaims") ||
      path.ends_with("deviceclasses")) {
    return List(path, query);
  }
  return Status(404, "NotFound", path + " not found");
}

ApiStandIn::Reply ApiStandIn::Patch(const std::string& item, const std::string& body) {
  json patch = json::parse(body, nullptr, false);
  if (patch.is_discarded() || !patch.is_object()) return Status(400, "BadRequest", "not a patch");
  auto it = objects_.find(item);
  if (it == objects_.end()) return Status(404, "NotFound", item + " not found");
  it->second.merge_patch(patch);
  it->second["metadata"]["resourceVersion"] = std::to_string(++version_);
  Notify("MODIFIED", item, it->second);
  return {200, it->second};
}

ApiStandIn::Reply ApiStandIn::Delete(const std::string& item) {
  auto it = objects_.find(item);
  if (it == objects_.end()) return Status(404, "NotFound", item + " not found");
  json gone = it->second;
  objects_.erase(it);
  Notify("DELETED", item, gone);
  return {200, gone};
}

ApiStandIn::Reply ApiStandIn::Create(const std::string& path, const std::string& body) {
  json obj = json::parse(body, nullptr, false);
  if (obj.is_discarded() || !obj.contains("metadata")) {
    return Status(400, "BadRequest", "not an object");
  }
  std::string at = path + "/" + obj["metadata"].value("name", std::string());
  if (objects_.contains(at)) return Status(409, "AlreadyExists", at + " already exists");
  obj["metadata"]["uid"] = "uid-" + std::to_string(++version_);
  obj["metadata"]["resourceVersion"] = std::to_string(++version_);
  obj["metadata"]["creationTimestamp"] = "2026-12-03T00:00:00Z";
  objects_[at] = obj;
  Notify("ADDED", at, obj);
  return {201, obj};
}

ApiStandIn::Reply ApiStandIn::Replace(const std::string& path, const std::string& body) {
  json obj = json::parse(body, nullptr, false);
  if (obj.is_discarded() || !obj.contains("metadata")) {
    return Status(400, "BadRequest", "not an object");
  }
  auto it = objects_.find(path);
  if (it == objects_.end()) return Status(404, "NotFound", path + " not found");
  std::string want = obj["metadata"].value("resourceVersion", std::string());
  if (!want.empty() && want != it->second["metadata"].value("resourceVersion", std::string())) {
    return Status(409, "Conflict", path + ": the object has been modified");
  }
  obj["metadata"]["uid"] = it->second["metadata"]["uid"];
  obj["metadata"]["resourceVersion"] = std::to_string(++version_);
  it->second = obj;
  Notify("MODIFIED", path, obj);
  return {200, obj};
}

ApiStandIn::Reply ApiStandIn::List(const std::string& path, const std::string& query) const {
  auto sel = FieldSelector(query);
  json items = json::array();
  std::string prefix = path + "/";
  for (const auto& [at, obj] : objects_) {
    if (at.starts_with(prefix) && at.find('/', prefix.size()) == std::string::npos &&
        Matches(obj, sel)) {
      items.push_back(obj);
    }
  }
  return {200, json{{"kind", "List"},
                    {"apiVersion", "v1"},
                    {"metadata", {{"resourceVersion", std::to_string(version_)}}},
                    {"items", items}}};
}

std::optional<json> ApiStandIn::Object(const std::string& path) const {
  std::lock_guard l(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> ApiStandIn::Objects(const std::string& prefix) const {
  std::lock_guard l(mu_);
  std::vector<json> out;
  for (const auto& [at, obj] : objects_) {
    if (at.starts_with(prefix)) out.push_back(obj);
  }
  return out;
}

void ApiStandIn::Put(const std::string& path, json obj) {
  std::lock_guard l(mu_);
  if (!obj["metadata"].contains("uid"))
    obj["metadata"]["uid"] = "uid-" + std::to_string(++version_);
  obj["metadata"]["resourceVersion"] = std::to_string(++version_);
  objects_[path] = std::move(obj);
}

void ApiStandIn::Remove(const std::string& path) {
  std::lock_guard l(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return;
  json gone = std::move(it->second);
  objects_.erase(it);
  Notify("DELETED", path, gone);
}

std::vector<std::string> ApiStandIn::requests() const {
  std::lock_guard l(mu_);
  return log_;
}

std::string ApiStandIn::last_headers() const {
  std::lock_guard l(mu_);
  return last_headers_;
}

}  // namespace kuberdma::standins
