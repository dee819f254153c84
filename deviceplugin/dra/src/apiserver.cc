// SPDX-License-Identifier: Apache-2.0
// The DRA driver's API server client over libcurl (apiserver.h).
#include "kuberdma/dra/apiserver.h"

#include <curl/curl.h>

#include <chrono>
#include <memory>
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

// One attempt; `err` set when no HTTP answer came.
Answer Once(const ApiServer& api, const std::string& url, const std::string& token,
            std::string* err) {
  Answer a;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
  if (!c) {
    *err = "curl_easy_init failed";
    return a;
  }
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  std::string auth = "Authorization: Bearer " + token;
  if (!token.empty()) headers = curl_slist_append(headers, auth.c_str());
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, static_cast<long>(api.timeout_s));
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "https,http");
  if (!api.ca_file.empty()) curl_easy_setopt(c.get(), CURLOPT_CAINFO, api.ca_file.c_str());
  CURLcode rc = curl_easy_perform(c.get());
  curl_slist_free_all(headers);
  if (a.too_large) {
    *err = "the answer exceeds " + std::to_string(kMaxAnswerBytes) + " bytes";
  } else if (rc != CURLE_OK) {
    *err = curl_easy_strerror(rc);
  } else {
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &a.status);
  }
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

Result<nlohmann::json> Get(const ApiServer& api, const std::string& path) {
  static const bool init = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!init) return Fail(ErrorCode::kInternal, "libcurl failed to initialise");
  std::string url = api.base + path;
  std::string last;
  auto backoff = std::chrono::milliseconds(200);
  for (int i = 0; i < std::max(1, api.attempts); ++i) {
    if (i > 0) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    // Read on every request: the kubelet rotates projected tokens.
    std::string token;
    if (!api.token_file.empty()) {
      auto t = ReadFile(api.token_file);
      if (!t) return Fail(t.error());
      token = *t;
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    }
    std::string err;
    Answer a = Once(api, url, token, &err);
    if (a.status == 200) return ParseUntrustedJson(a.body, "the API server's answer to " + path);
    if (a.status == 404) return Fail(ErrorCode::kNotFound, "GET " + path + ": not found");
    if (a.status == 401 || a.status == 403) {
      return Fail(ErrorCode::kPermissionDenied,
                  "GET " + path + ": HTTP " + std::to_string(a.status) +
                      " (the ServiceAccount needs get on resourceclaims.resource.k8s.io: the "
                      "chart's ClusterRole)");
    }
    if (a.status >= 400 && a.status < 500 && a.status != 429) {
      return Fail(ErrorCode::kInvalidArgument,
                  "GET " + path + ": HTTP " + std::to_string(a.status));
    }
    last = a.status != 0 ? "HTTP " + std::to_string(a.status) : err;
  }
  return Fail(ErrorCode::kIo, "GET " + url + ": " + last + " after " +
                                  std::to_string(std::max(1, api.attempts)) + " attempt(s)");
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
