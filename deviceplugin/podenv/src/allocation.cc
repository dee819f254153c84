// SPDX-License-Identifier: Apache-2.0
// Allocation records: one JSON file per slot, written by the device plugin, read by the CNI.
#include "kuberdma/podenv/allocation.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"

namespace kuberdma::podenv {

using nlohmann::json;

namespace {

// A slot ID is a file name here: no separators, no dot files, bounded.
bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == ':';
  });
}

Result<std::vector<std::string>> Names(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > kMaxAllocationSlots) {
    return Fail(ErrorCode::kInvalidArgument, std::string("allocation record: '") + key +
                                                 "' must be an array of at most " +
                                                 std::to_string(kMaxAllocationSlots) + " names");
  }
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string() || !PlainName(v.get<std::string>())) {
      return Fail(ErrorCode::kInvalidArgument,
                  std::string("allocation record: every entry of '") + key + "' must be a name");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

std::string AllocationsDir() {
  const char* env = std::getenv(kAllocationsDirEnv);
  return env != nullptr && *env != '\0' ? env : kAllocationsDir;
}

std::string EncodeAllocation(const AllocationGroup& group) {
  return json{{"resource", group.resource}, {"slots", group.slots}, {"hcas", group.hcas}}.dump() +
         "\n";
}

Result<AllocationGroup> DecodeAllocation(std::string_view text) {
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(text, "allocation record"));
  if (!j.is_object() || !j.contains("resource") || !j["resource"].is_string()) {
    return Fail(ErrorCode::kInvalidArgument, "allocation record: not an object with a resource");
  }
  AllocationGroup g{.resource = j["resource"].get<std::string>()};
  KUBERDMA_ASSIGN_OR_RETURN(g.slots, Names(j, "slots"));
  KUBERDMA_ASSIGN_OR_RETURN(g.hcas, Names(j, "hcas"));
  if (g.slots.size() != g.hcas.size()) {
    return Fail(ErrorCode::kInvalidArgument, "allocation record: slots and hcas differ in length");
  }
  return g;
}

Result<void> RecordAllocation(const std::string& dir, const AllocationGroup& group) {
  for (const auto& slot : group.slots) {
    if (!PlainName(slot)) {
      return Fail(ErrorCode::kInvalidArgument, "slot ID '" + slot + "' is not a plain name");
    }
  }
  KUBERDMA_TRY(MakeDirs(dir));
  std::string text = EncodeAllocation(group);
  for (const auto& slot : group.slots) KUBERDMA_TRY(WriteFileAtomic(dir + "/" + slot, text));
  return {};
}

Result<std::optional<AllocationGroup>> FindAllocation(const std::string& dir,
                                                      const std::string& slot) {
  if (!PlainName(slot)) return std::optional<AllocationGroup>{};
  std::string path = dir + "/" + slot;
  auto text = ReadRegularFile(path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return std::optional<AllocationGroup>{};
  if (!text) return Fail(text.error().Wrap("read allocation record " + path));
  auto group = DecodeAllocation(*text);
  if (!group) return Fail(group.error().Wrap(path));
  return std::optional<AllocationGroup>(std::move(*group));
}

}  // namespace kuberdma::podenv
