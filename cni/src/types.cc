// SPDX-License-Identifier: Apache-2.0
// CNI_* environment parsing and library-error translation.
#include "kuberdma/cni/types.h"

#include <cctype>

namespace kuberdma::cni {

CniError FromError(const Error& e, int fallback) {
  switch (e.code()) {
    case ErrorCode::kBusy:
    case ErrorCode::kTimeout:
      return {kTryAgainLater, e.message(), ""};
    case ErrorCode::kInvalidArgument:
      return {kInvalidConfig, e.message(), ""};
    default:
      return {fallback, e.message(), ""};
  }
}

namespace {

bool ValidContainerId(std::string_view id) {
  if (id.empty()) return false;
  if (std::isalnum(static_cast<unsigned char>(id[0])) == 0) return false;
  for (char c : id) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

// The spec's interface name rules: 1..15 bytes, not "." or "..", no '/', ':' or whitespace.
bool ValidIfname(std::string_view n) {
  if (n.empty() || n.size() > 15 || n == "." || n == "..") return false;
  for (char c : n) {
    if (c == '/' || c == ':' || std::isspace(static_cast<unsigned char>(c)) != 0) return false;
  }
  return true;
}

}  // namespace

CniResult<Request> ParseEnv(const char* (*getenv)(const char*)) {
  auto get = [&](const char* k) {
    const char* v = getenv(k);
    return std::string(v == nullptr ? "" : v);
  };
  Request req;
  std::string cmd = get("CNI_COMMAND");
  if (cmd == "ADD") {
    req.command = Command::kAdd;
  } else if (cmd == "DEL") {
    req.command = Command::kDel;
  } else if (cmd == "CHECK") {
    req.command = Command::kCheck;
  } else if (cmd == "VERSION") {
    req.command = Command::kVersion;
  } else if (cmd == "STATUS") {
    req.command = Command::kStatus;
  } else if (cmd == "GC") {
    req.command = Command::kGc;
  } else {
    return CniFail(kInvalidEnv, cmd.empty() ? "CNI_COMMAND is not set"
                                            : "CNI_COMMAND '" + cmd + "' is not a CNI verb");
  }
  req.container_id = get("CNI_CONTAINERID");
  req.netns = get("CNI_NETNS");
  req.ifname = get("CNI_IFNAME");
  req.args = get("CNI_ARGS");
  req.path = get("CNI_PATH");
  const bool attach = req.command == Command::kAdd || req.command == Command::kDel ||
                      req.command == Command::kCheck;
  if (!attach) return req;
  if (!ValidContainerId(req.container_id)) {
    return CniFail(kInvalidEnv, req.container_id.empty()
                                    ? "CNI_CONTAINERID is not set"
                                    : "CNI_CONTAINERID '" + req.container_id + "' is not valid");
  }
  if (!ValidIfname(req.ifname)) {
    return CniFail(kInvalidEnv, req.ifname.empty() ? "CNI_IFNAME is not set"
                                                   : "CNI_IFNAME '" + req.ifname +
                                                         "' is not a valid interface name");
  }
  if (req.command != Command::kDel && req.netns.empty()) {
    return CniFail(kInvalidEnv, "CNI_NETNS is not set");
  }
  return req;
}

}  // namespace kuberdma::cni
