// SPDX-License-Identifier: Apache-2.0
// CNI_* environment parsing and library-error translation.
#include "kuberdma/cni/types.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

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
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
  });
}

// The spec's interface name rules: 1..15 bytes, not "." or "..", no '/', ':' or whitespace.
bool ValidIfname(std::string_view n) {
  if (n.empty() || n.size() > 15 || n == "." || n == "..") return false;
  return std::none_of(n.begin(), n.end(), [](char c) {
    return c == '/' || c == ':' || std::isspace(static_cast<unsigned char>(c)) != 0;
  });
}

// CNI_COMMAND's words, both ways.
constexpr std::pair<const char*, Command> kVerbs[] = {
    {"ADD", Command::kAdd},         {"DEL", Command::kDel},       {"CHECK", Command::kCheck},
    {"VERSION", Command::kVersion}, {"STATUS", Command::kStatus}, {"GC", Command::kGc}};

std::optional<Command> ParseCommand(const std::string& cmd) {
  for (const auto& [name, c] : kVerbs) {
    if (cmd == name) return c;
  }
  return std::nullopt;
}

// What ADD, DEL and CHECK need beyond the verb: a valid container ID and interface name, and a
// namespace (DEL may come after the namespace is gone).
CniResult<void> ValidateAttachment(const Request& req) {
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
  return {};
}

}  // namespace

std::string CommandName(Command command) {
  for (const auto& [name, c] : kVerbs) {
    if (c == command) return name;
  }
  return "";
}

CniResult<Request> ParseEnv(const char* (*getenv)(const char*)) {
  auto get = [&](const char* k) {
    const char* v = getenv(k);
    return std::string(v == nullptr ? "" : v);
  };
  Request req;
  std::string cmd = get("CNI_COMMAND");
  auto command = ParseCommand(cmd);
  if (!command) {
    return CniFail(kInvalidEnv, cmd.empty() ? "CNI_COMMAND is not set"
                                            : "CNI_COMMAND '" + cmd + "' is not a CNI verb");
  }
  req.command = *command;
  req.container_id = get("CNI_CONTAINERID");
  req.netns = get("CNI_NETNS");
  req.ifname = get("CNI_IFNAME");
  req.args = get("CNI_ARGS");
  req.path = get("CNI_PATH");
  const bool attach = req.command == Command::kAdd || req.command == Command::kDel ||
                      req.command == Command::kCheck;
  if (!attach) return req;
  if (auto valid = ValidateAttachment(req); !valid) return tl::unexpected(valid.error());
  return req;
}

}  // namespace kuberdma::cni
