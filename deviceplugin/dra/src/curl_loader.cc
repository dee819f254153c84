// SPDX-License-Identifier: Apache-2.0
// libcurl, loaded when the API server is first asked, not at start. Linked, libcurl and its TLS,
// Kerberos, LDAP and SSH closure (Debian's libcurl4 pulls in 20 libraries) cost every
// rdma-device-plugin 3.7 MiB of idle RSS (bench/README.md), though only the DRA driver and the
// node labels ever use it. The entry points apiserver.cc calls are defined here with libcurl's
// own signatures and forward to the loaded library, as the validator's nccl_loader.cc does for
// NCCL.
// curl.h turns curl_easy_setopt and curl_easy_getinfo into type-checking macros under GCC;
// here they are the functions themselves.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>

namespace {

// The loaded libcurl.so.4 (RTLD_LOCAL: its symbols do not replace these), or nullptr.
void* Library() {
  static void* const handle = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

template <typename Fn>
Fn Symbol(const char* name) {
  void* lib = Library();
  return lib == nullptr ? nullptr : reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

extern "C" {

CURLcode curl_global_init(long flags) {
  static const auto fn = Symbol<CURLcode (*)(long)>("curl_global_init");
  return fn == nullptr ? CURLE_FAILED_INIT : fn(flags);
}

CURL* curl_easy_init() {
  static const auto fn = Symbol<CURL* (*)()>("curl_easy_init");
  return fn == nullptr ? nullptr : fn();
}

void curl_easy_cleanup(CURL* curl) {
  static const auto fn = Symbol<void (*)(CURL*)>("curl_easy_cleanup");
  if (fn != nullptr) fn(curl);
}

CURLcode curl_easy_perform(CURL* curl) {
  static const auto fn = Symbol<CURLcode (*)(CURL*)>("curl_easy_perform");
  return fn == nullptr ? CURLE_FAILED_INIT : fn(curl);
}

const char* curl_easy_strerror(CURLcode code) {
  static const auto fn = Symbol<const char* (*)(CURLcode)>("curl_easy_strerror");
  return fn == nullptr ? "libcurl.so.4 is not loaded" : fn(code);
}

curl_slist* curl_slist_append(curl_slist* list, const char* data) {
  static const auto fn = Symbol<curl_slist* (*)(curl_slist*, const char*)>("curl_slist_append");
  return fn == nullptr ? list : fn(list, data);
}

void curl_slist_free_all(curl_slist* list) {
  static const auto fn = Symbol<void (*)(curl_slist*)>("curl_slist_free_all");
  if (fn != nullptr) fn(list);
}

// The third argument's type follows from the option's number (curl.h's CURLOPTTYPE_*), as
// libcurl itself reads it.
CURLcode curl_easy_setopt(CURL* curl, CURLoption option, ...) {
  static const auto fn = Symbol<CURLcode (*)(CURL*, CURLoption, ...)>("curl_easy_setopt");
  if (fn == nullptr) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, option);
  CURLcode rc = CURLE_OK;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    rc = fn(curl, option, va_arg(ap, long));
  } else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB) {
    rc = fn(curl, option, va_arg(ap, curl_off_t));
  } else {
    rc = fn(curl, option, va_arg(ap, void*));  // objects, strings, functions, lists, blobs
  }
  va_end(ap);
  return rc;
}

// Every CURLINFO's argument is a pointer to where the answer goes.
CURLcode curl_easy_getinfo(CURL* curl, CURLINFO info, ...) {
  static const auto fn = Symbol<CURLcode (*)(CURL*, CURLINFO, ...)>("curl_easy_getinfo");
  if (fn == nullptr) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  CURLcode rc = fn(curl, info, va_arg(ap, void*));
  va_end(ap);
  return rc;
}

}  // extern "C"
