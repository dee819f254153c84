// SPDX-License-Identifier: Apache-2.0
// The DRA driver's API server client (libcurl): ResourceClaims read for NodePrepareResources, with
// the pod's ServiceAccount (its token as a bearer, its CA for TLS), bounded answers, and retries
// with backoff where a retry can help (connection failures, 429, 5xx); never on 4xx.
//
//   auto api = ApiServer::InCluster();            // KUBERNETES_SERVICE_HOST/PORT, the SA files
//   ApiServerClaims claims(*api);
//   auto claim = claims.Get({.ns = "team-a", .uid = "...", .name = "trainer-0-pairs"});
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/dra/server.h"

namespace kuberdma::dra {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
inline constexpr size_t kMaxAnswerBytes = 4u << 20;  // a claim is a few KiB; a slice list more

struct ApiServer {
  std::string base;        // "https://10.96.0.1:443" (no trailing slash)
  std::string token_file;  // read on every request: the kubelet rotates it
  std::string ca_file;     // "" with an http:// base (tests)
  int timeout_s = 10;      // each request
  int attempts = 4;        // backoff 0.2, 0.4, 0.8 s between them
  // The in-cluster connection from `getenv` (KUBERNETES_SERVICE_HOST, _PORT) and the
  // ServiceAccount files under `sa_dir`; kInvalidArgument saying what is missing.
  static Result<ApiServer> InCluster(const std::function<const char*(const char*)>& getenv,
                                     const std::string& sa_dir = kServiceAccountDir);
};

// One request: `body` (JSON text) with POST and PUT, a JSON merge patch with PATCH.
struct Call {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;            // "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=..."
  std::string body;
};

// `call`, retried where a retry can help: the JSON answer on 200/201; kNotFound on 404,
// kAlreadyExists on 409 (a conflict: read again), kPermissionDenied on 401/403 (naming the RBAC
// rules), kInvalidArgument on another 4xx or a body that is not JSON, kIo when every attempt
// failed (connection, 429, 5xx).
Result<nlohmann::json> Request(const ApiServer& api, const Call& call);

// One GET of `path` ("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/name"): the JSON
// body on 200; kNotFound on 404, kPermissionDenied on 401/403 (naming the RBAC rule to check),
// kTimeout or kIo when every attempt failed, kInvalidArgument on a body that is not JSON.
Result<nlohmann::json> Get(const ApiServer& api, const std::string& path);

// A watch (`path` with "watch=true"): each event ({"type": "ADDED"|"MODIFIED"|"DELETED"|
// "ERROR", "object": ...}) to `on_event` as it arrives, until the API server ends the stream
// (its timeoutSeconds) or `stop()` says so (asked about once a second). One attempt: the caller
// watches again. Errors as Request's; an event line over kMaxAnswerBytes or not JSON ends it
// with kInvalidArgument.
Result<void> Watch(const ApiServer& api, const std::string& path,
                   const std::function<void(const nlohmann::json&)>& on_event,
                   const std::function<bool()>& stop);

// Claims from the API server.
class ApiServerClaims final : public ClaimSource {
 public:
  explicit ApiServerClaims(ApiServer api) : api_(std::move(api)) {}
  Result<nlohmann::json> Get(const ClaimRef& ref) override;

 private:
  ApiServer api_;
};

}  // namespace kuberdma::dra
