// SPDX-License-Identifier: Apache-2.0
// The DRA driver's API server client over libcurl (apiserver.h).
#include "kuberdma/dra/apiserver.h"

#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"

namespace kuberdma::dra {

namespace {

struct Answer {
  long status = 0;
  std::string body;
  bool too_large = false;
};

size_t Collect(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<Answer*>(user);
  if (a->body.size() + size * n > kMaxAnswerBytes) {
    a->too_large = true;
    return 0;  // aborts the transfer
  }
  a->body.append(data, size * n);
  return size * n;
}

// A DNS-1123 name or namespace: nothing that could leave its path segment.
bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  return std::ranges::all_of(s, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

// One attempt: the HTTP answer, whatever its status; kIo when none came.
Result<Answer> Once(const ApiServer& api, const Call& call, const std::string& url,
                    const std::string& token) {
  Answer a;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
  if (!c) return Fail(ErrorCode::kIo, "curl_easy_init failed");
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  // A PATCH is a JSON merge patch (RFC 7386), the one kind every API server takes for any object.
  if (!call.body.empty()) {
    headers = curl_slist_append(headers, call.method == "PATCH"
                                             ? "Content-Type: application/merge-patch+json"
                                             : "Content-Type: application/json");
  }
  std::string auth = "Authorization: Bearer " + token;
  if (!token.empty()) headers = curl_slist_append(headers, auth.c_str());
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &a);
  if (call.method != "GET") curl_easy_setopt(c.get(), CURLOPT_CUSTOMREQUEST, call.method.c_str());
  if (!call.body.empty()) {
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, call.body.c_str());
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(call.body.size()));
  }
  curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, static_cast<long>(api.timeout_s));
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "https,http");
  if (!api.ca_file.empty()) curl_easy_setopt(c.get(), CURLOPT_CAINFO, api.ca_file.c_str());
  CURLcode rc = curl_easy_perform(c.get());
  curl_slist_free_all(headers);
  if (a.too_large) {
    return Fail(ErrorCode::kIo, "the answer exceeds " + std::to_string(kMaxAnswerBytes) + " bytes");
  }
  if (rc != CURLE_OK) return Fail(ErrorCode::kIo, curl_easy_strerror(rc));
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &a.status);
  return a;
}

}  // namespace

Result<ApiServer> ApiServer::InCluster(const std::function<const char*(const char*)>& getenv,
                                       const std::string& sa_dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Fail(ErrorCode::kInvalidArgument,
                "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 service address
  return ApiServer{.base = "https://" + h + ":" + port,
                   .token_file = sa_dir + "/token",
                   .ca_file = sa_dir + "/ca.crt"};
}

namespace {

// What an HTTP status means, for `what` ("GET /apis/..."); nullopt for 200/201 and for statuses
// worth another attempt (429, 5xx).
std::optional<Error> Refusal(long status, const std::string& what) {
  if (status == 404) return Error(ErrorCode::kNotFound, what + ": not found");
  if (status == 409) {
    return Error(ErrorCode::kAlreadyExists,
                 what + ": HTTP 409 (changed or created by someone else since it was read)");
  }
  if (status == 401 || status == 403) {
    return Error(ErrorCode::kPermissionDenied,
                 what + ": HTTP " + std::to_string(status) +
                     " (the ServiceAccount lacks the verb: the chart's ClusterRole grants get on "
                     "resourceclaims.resource.k8s.io and list/create/update/delete on "
                     "resourceslices.resource.k8s.io)");
  }
  if (status >= 400 && status < 500 && status != 429) {
    return Error(ErrorCode::kInvalidArgument, what + ": HTTP " + std::to_string(status));
  }
  return std::nullopt;
}

// What the API server said in a refusal (a Status' message: an admission policy's, RBAC's),
// as " (the API server: ...)", or "".
std::string Said(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("message") || !j["message"].is_string()) return "";
  std::string m = j["message"].get<std::string>().substr(0, 300);
  return " (the API server: " + m + ")";
}

Result<std::string> ReadToken(const ApiServer& api) {
  if (api.token_file.empty()) return std::string();
  KUBERDMA_ASSIGN_OR_RETURN(std::string token, ReadFile(api.token_file));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

}  // namespace

Result<nlohmann::json> Request(const ApiServer& api, const Call& call) {
  static const bool init = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!init) {
    return Fail(ErrorCode::kUnsupported,
                "libcurl failed to initialise: the API server client loads libcurl.so.4 when "
                "first used; install Debian's libcurl4 beside rdma-device-plugin");
  }
  std::string url = api.base + call.path;
  std::string what = call.method + " " + call.path;
  std::string last;
  auto backoff = std::chrono::milliseconds(200);
  for (int i = 0; i < std::max(1, api.attempts); ++i) {
    if (i > 0) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    // Read on every request: the kubelet rotates projected tokens.
    KUBERDMA_ASSIGN_OR_RETURN(std::string token, ReadToken(api));
    auto a = Once(api, call, url, token);
    if (a && (a->status == 200 || a->status == 201)) {
      return ParseUntrustedJson(a->body, "the API server's answer to " + what);
    }
    if (!a) {
      last = a.error().message();
      continue;
    }
    if (auto refused = Refusal(a->status, what + Said(a->body))) return Fail(*refused);
    last = a->status != 0 ? "HTTP " + std::to_string(a->status) : "no HTTP status";
  }
  return Fail(ErrorCode::kIo, what + " at " + api.base + ": " + last + " after " +
                                  std::to_string(std::max(1, api.attempts)) + " attempt(s)");
}

namespace {

struct WatchState {
  const std::function<void(const nlohmann::json&)>* on_event;
  const std::function<bool()>* stop;
  std::string line;
  std::string bad;  // why the stream was cut
};

size_t WatchLines(char* data, size_t size, size_t n, void* user) {
  auto* w = static_cast<WatchState*>(user);
  for (size_t i = 0; i < size * n; ++i) {
    if (data[i] != '\n') {
      w->line += data[i];
      if (w->line.size() > kMaxAnswerBytes) {
        w->bad = "a watch event exceeds " + std::to_string(kMaxAnswerBytes) + " bytes";
        return 0;
      }
      continue;
    }
    auto event = ParseUntrustedJson(w->line, "a watch event");
    w->line.clear();
    if (!event) {
      w->bad = event.error().message();
      return 0;
    }
    (*w->on_event)(*event);
  }
  return size * n;
}

int WatchProgress(void* user, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/, curl_off_t /*ultotal*/,
                  curl_off_t /*ulnow*/) {
  auto* w = static_cast<WatchState*>(user);
  return (*w->stop)() ? 1 : 0;
}

}  // namespace

Result<void> Watch(const ApiServer& api, const std::string& path,
                   const std::function<void(const nlohmann::json&)>& on_event,
                   const std::function<bool()>& stop) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string token, ReadToken(api));
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
  if (!c) return Fail(ErrorCode::kInternal, "curl_easy_init failed");
  WatchState w{.on_event = &on_event, .stop = &stop};
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  std::string auth = "Authorization: Bearer " + token;
  if (!token.empty()) headers = curl_slist_append(headers, auth.c_str());
  std::string url = api.base + path;
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, WatchLines);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &w);
  curl_easy_setopt(c.get(), CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c.get(), CURLOPT_XFERINFOFUNCTION, WatchProgress);
  curl_easy_setopt(c.get(), CURLOPT_XFERINFODATA, &w);
  curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, static_cast<long>(api.timeout_s));
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "https,http");
  if (!api.ca_file.empty()) curl_easy_setopt(c.get(), CURLOPT_CAINFO, api.ca_file.c_str());
  CURLcode rc = curl_easy_perform(c.get());
  curl_slist_free_all(headers);
  std::string what = "watch " + path;
  if (!w.bad.empty()) return Fail(ErrorCode::kInvalidArgument, what + ": " + w.bad);
  if (rc == CURLE_ABORTED_BY_CALLBACK) return {};  // stop() said so
  if (rc != CURLE_OK)
    return Fail(ErrorCode::kIo, what + " at " + api.base + ": " + curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &status);
  if (auto refused = Refusal(status, what)) return Fail(*refused);
  if (status != 200) return Fail(ErrorCode::kIo, what + ": HTTP " + std::to_string(status));
  return {};
}

Result<nlohmann::json> Get(const ApiServer& api, const std::string& path) {
  return Request(api, {.method = "GET", .path = path});
}

Result<nlohmann::json> ApiServerClaims::Get(const ClaimRef& ref) {
  if (!IsName(ref.ns) || !IsName(ref.name)) {
    return Fail(ErrorCode::kInvalidArgument,
                "claim " + ref.Text() + ": the namespace or name is not a Kubernetes name");
  }
  return dra::Get(api_,
                  "/apis/resource.k8s.io/v1/namespaces/" + ref.ns + "/resourceclaims/" + ref.name);
}

}  // namespace kuberdma::dra
