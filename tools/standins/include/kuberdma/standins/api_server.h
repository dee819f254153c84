// SPDX-License-Identifier: Apache-2.0
// ApiStandIn: a stand-in Kubernetes API server for resource.k8s.io/v1, for tests, the benchmark
// and `make demo DRA=1` (no kube-apiserver here). Plain HTTP/1.1 on loopback, one connection at
// a time, every request logged ("PUT /apis/resource.k8s.io/v1/resourceslices/node-a-hca-0").
//
// What it does as the real one does: ResourceSlices and DeviceClasses (cluster-scoped) and
// ResourceClaims (namespaced) kept as JSON; create (POST: 409 when the name is taken, uid,
// resourceVersion, creationTimestamp set), get, list (fieldSelector spec.driver and
// spec.nodeName on slices), replace (PUT: 409 on a stale metadata.resourceVersion; a claim's
// /status subresource too; a pod's status written in protobuf, as client-go does for Multus, is
// answered 200 and not stored), delete (404 when absent), watch (GET ...?watch=true: ADDED,
// MODIFIED and DELETED events of the listed path and field selector, streamed as the real one
// does, one JSON object a line), and, when `restrict_slices_to_node` names a user, the chart's
// ValidatingAdmissionPolicy for ResourceSlices (deploy/helm/kube-rdma/templates/dra.yaml): that
// user may create, replace and delete only slices whose spec.nodeName is the node its token
// was bound to (the ServiceAccount token's authentication.kubernetes.io/node-name), else 403
// with the policy's message. The policy's CEL is not evaluated: its rule is coded here, and a
// test holds the rendered policy to the same expressions. What it does not: validation (the
// schema check does that, deploy/check_schemas.py), other admission, authentication beyond the
// `tokens` it is given.
//
//   ApiStandIn api;                       // a free port on 127.0.0.1
//   ApiServer conn{.base = api.base()};   // the driver's client
//   api.Put("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/pairs", claim);
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kuberdma::standins {

class ApiStandIn {
 public:
  ApiStandIn();  // listening on 127.0.0.1, a free port
  ~ApiStandIn();
  ApiStandIn(const ApiStandIn&) = delete;
  ApiStandIn& operator=(const ApiStandIn&) = delete;

  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The object at `path` (no query), as a client would GET it.
  std::optional<nlohmann::json> Object(const std::string& path) const;
  // Every object whose path starts with `prefix` ("/apis/resource.k8s.io/v1/resourceslices/").
  std::vector<nlohmann::json> Objects(const std::string& prefix) const;
  // Stores `obj` at `path` as if created or replaced, with a new resourceVersion.
  void Put(const std::string& path, nlohmann::json obj);
  void Remove(const std::string& path);

  // "METHOD path" of every request, in order.
  std::vector<std::string> requests() const;
  // The headers of the last request (a test checks the bearer token).
  std::string last_headers() const;
  // Each answer waits this long first (a slow API server).
  std::atomic<int> delay_ms{0};
  // The next `fail_next` requests answer 503 (an API server restarting).
  std::atomic<int> fail_next{0};
  // Drop the devices' taints of written slices, as an API server with DRADeviceTaints off does.
  std::atomic<bool> drop_device_taints{false};

  // Who a bearer token is: a user and, for a pod's ServiceAccount token, the pod's node.
  struct Identity {
    std::string user;  // "system:serviceaccount:kube-rdma:kube-rdma-dra"
    std::string node;  // "" when the token is bound to no node
  };
  void AddToken(const std::string& token, Identity who);
  // The user the node policy restricts ("" : no policy).
  void RestrictSlicesToNode(const std::string& user);
  // Open watch streams.
  int watchers() const;

 private:
  struct Reply {
    int status;
    nlohmann::json body;
  };
  void Loop();
  Reply Handle(const std::string& method, const std::string& target, const std::string& body);
  // The node policy's verdict, an injected 503, or Handle's answer.
  Reply Answer(const std::string& method, const std::string& target, const std::string& body,
               const std::string& head);
  Reply Create(const std::string& path, const std::string& body);
  Reply Replace(const std::string& path, const std::string& body);
  // A JSON merge patch (RFC 7386), as kubectl label sends; and a DELETE. mu_ held.
  Reply Patch(const std::string& item, const std::string& body);
  Reply Delete(const std::string& item);
  Reply List(const std::string& path, const std::string& query) const;
  // The node policy's verdict on a slice write by `headers`' token; nullopt: allowed.
  std::optional<Reply> Admit(const std::string& method, const std::string& path,
                             const std::string& body, const std::string& headers) const;
  // A watch request on connection `c`: answered with the stream's head, kept open.
  void AddWatcher(int c, const std::string& target);
  // Sends `type` of `obj` at `path` to the watchers it matches (under mu_).
  void Notify(const char* type, const std::string& path, const nlohmann::json& obj);
  static Reply Status(int code, const std::string& reason, const std::string& message);

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> objects_;  // by path
  int64_t version_ = 0;
  std::vector<std::string> log_;
  std::string last_headers_;
  std::map<std::string, Identity> tokens_;
  std::string restricted_user_;
  struct Watcher {
    int fd;
    std::string prefix;  // "<list path>/"
    std::map<std::string, std::string> selector;
  };
  std::vector<Watcher> watchers_;
  std::thread thread_;
};

}  // namespace kuberdma::standins
