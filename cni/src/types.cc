// SPDX-License-Identifier: Apache-2.0
// CNI_* environment parsing and library-error translation.
#include "kuberdma/cni/types.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
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
  if (id.empty() || id.size() > kMaxContainerIdBytes) return false;
  if (std::isalnum(static_cast<unsigned char>(id[0])) == 0) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
  });
}

// Whether `s` is well-formed UTF-8 without control characters (C0, DEL, C1).
bool PrintableUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = c & (0x7fu >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) return false;
    i += len;
  }
  return true;
}

// The spec's interface name rules (1..15 bytes, not "." or "..", no '/', ':' or whitespace), and
// the kernel's: it expands a '%' into a number ("net%d" becomes net0), so a name with one is not
// the name the pod gets.
bool ValidIfname(std::string_view n) {
  if (n.empty() || n.size() > 15 || n == "." || n == "..") return false;
  if (!PrintableUtf8(n)) return false;
  return std::none_of(n.begin(), n.end(), [](char c) {
    return c == '/' || c == ':' || c == '%' || std::isspace(static_cast<unsigned char>(c)) != 0;
  });
}

// `v` in quotes, bytes outside printable ASCII as \xNN: safe in a message, a log and JSON.
std::string Shown(std::string_view v) {
  std::string out = "'";
  for (char c : v.substr(0, 64)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out + (v.size() > 64 ? "'... (" + std::to_string(v.size()) + " bytes)" : "'");
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
                                    : "CNI_CONTAINERID " + Shown(req.container_id) +
                                          " is not valid (1-" +
                                          std::to_string(kMaxContainerIdBytes) +
                                          " letters, digits, '_', '.', '-', starting with a "
                                          "letter or digit)");
  }
  if (!ValidIfname(req.ifname)) {
    return CniFail(kInvalidEnv, req.ifname.empty()
                                    ? "CNI_IFNAME is not set"
                                    : "CNI_IFNAME " + Shown(req.ifname) +
                                          " is not a valid interface name (1-15 bytes of "
                                          "printable UTF-8, no '/', ':', '%' or whitespace)");
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
  if (auto valid = ValidateAttachment(req); !valid) {
    // DEL of what ADD refused, or of a runtime's empty retry: succeed with nothing to undo.
    bool named = !req.container_id.empty() && !req.ifname.empty();
    if (req.command == Command::kDel && named) {
      req.unrecordable = valid.error().msg;
      return req;
    }
    return tl::unexpected(valid.error());
  }
  return req;
}

std::string CniArg(const std::string& args, const std::string& key) {
  std::string value;
  size_t pos = 0;
  while (pos <= args.size()) {
    size_t end = args.find(';', pos);
    if (end == std::string::npos) end = args.size();
    std::string_view kv(args.data() + pos, end - pos);
    if (kv.size() > key.size() && kv.substr(0, key.size()) == key && kv[key.size()] == '=') {
      value = std::string(kv.substr(key.size() + 1));
    }
    pos = end + 1;
  }
  return value;
}

}  // namespace kuberdma::cni
