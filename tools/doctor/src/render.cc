// SPDX-License-Identifier: Apache-2.0
// The readable form of a view.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "internal.h"
#include "kuberdma/contract/pod_env.h"

namespace kuberdma::doctor {

using internal::Join;
using nlohmann::json;

namespace {

// A value as one cell: strings bare, lists comma-joined, objects as k=v pairs.
std::string Cell(const json& x) {
  if (x.is_string()) return x.get<std::string>();
  if (x.is_null()) return "-";
  if (x.is_object()) {
    std::string out;
    for (const auto& [k, val] : x.items()) out += (out.empty() ? "" : " ") + k + "=" + Cell(val);
    return out.empty() ? "-" : out;
  }
  if (x.is_array()) {
    std::string out;
    for (const auto& e : x) out += (out.empty() ? "" : ",") + Cell(e);
    return out.empty() ? "-" : out;
  }
  return x.dump();  // a number or a boolean
}

void RenderHcas(const json& hcas, std::ostringstream& o) {
  for (const auto& h : hcas) {
    o << "  " << h.value("name", "") << "  " << h.value("address", "") << "  numa "
      << h.value("numaNode", -1) << "  " << h.value("linkLayer", "") << "  port "
      << h.value("portState", "") << "  netdev " << h.value("netdev", "-") << " ("
      << h.value("where", "") << ")" << (h.contains("pf") ? "  VF of " + Cell(h["pf"]) : "");
    if (h.value("rail", 0) > 0) o << "  rail " << h.value("rail", 0);
    if (h.contains("nodeNic")) o << "  NODE'S OWN NIC: " << h.value("nodeNic", "");
    o << "\n";
  }
}

void RenderMatrix(const json& doc, std::ostringstream& o) {
  o << "  " << std::string(18, ' ');
  for (const auto& h : doc["hcaNames"]) {
    char b[16];
    std::snprintf(b, sizeof b, "%-8s", h.get<std::string>().c_str());
    o << b;
  }
  o << " nearest\n";
  for (const auto& row : doc["matrix"]) {
    char b[32];
    std::snprintf(b, sizeof b, "  GPU %-14s", row["gpu"].get<std::string>().c_str());
    o << b;
    for (const auto& d : row["distances"]) {
      std::snprintf(b, sizeof b, "%-8s", d.get<std::string>().c_str());
      o << b;
    }
    o << " " << Join(row["nearest"].get<std::vector<std::string>>()) << "\n";
  }
}

// The pod's GID tables in show_gids' columns.
void RenderGids(const json& rows, std::ostringstream& o) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-8s %-4s %-5s %-39s %-15s %-3s %s\n", "DEV", "PORT", "INDEX",
                "GID", "IPv4", "VER", "DEV");
  o << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "  %-8s %-4u %-5u %-39s %-15s %-3s %s\n",
                  r.value("device", "").c_str(), r.value("port", 0u), r.value("index", 0u),
                  r.value("gid", "").c_str(), r.value("ipv4", "").c_str(),
                  r.value("version", "").c_str(), r.value("netdev", "").c_str());
    o << line;
  }
}

void RenderLossless(const json& ports, std::ostringstream& o) {
  for (const auto& p : ports) {
    o << "  " << p.value("netdev", "") << " (" << p.value("hca", "") << "): ";
    if (p.contains("pfcPriorities")) {
      o << "PFC " << Cell(p["pfcPriorities"]) << ", trust " << p.value("trust", "")
        << ", RoCE priority " << p.value("rocePriority", -1);
    } else {
      o << "PFC/trust " << p.value("dcb", "not read");
    }
    o << ", ECN " << (p.contains("ecn") ? Cell(p["ecn"]) : "?") << "\n";
  }
}

// A list of objects as a table (columns: every key, in first-seen order); an object as one
// "key: value" line per key; a scalar on the title's line. No raw JSON lines in the text view.
void RenderValue(const std::string& title, const json& x, std::ostringstream& o) {
  if (!x.is_array() || x.empty() || !x.front().is_object()) {
    if (!x.is_object()) {
      o << "  " << title << ": " << Cell(x) << "\n";
      return;
    }
    o << "  " << title << ":\n";
    for (const auto& [k, val] : x.items()) o << "    " << k << ": " << Cell(val) << "\n";
    return;
  }
  std::vector<std::string> cols;
  for (const auto& row : x) {
    for (const auto& [k, val] : row.items()) {
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    }
  }
  std::vector<size_t> width(cols.size());
  std::vector<std::vector<std::string>> cells;
  for (size_t c = 0; c < cols.size(); ++c) width[c] = cols[c].size();
  for (const auto& row : x) {
    cells.emplace_back();
    for (size_t c = 0; c < cols.size(); ++c) {
      cells.back().push_back(row.contains(cols[c]) ? Cell(row[cols[c]]) : "-");
      width[c] = std::max(width[c], cells.back().back().size());
    }
  }
  o << "  " << title << ":\n";
  auto line = [&](const std::vector<std::string>& r) {
    o << "   ";
    for (size_t c = 0; c < r.size(); ++c) {
      o << " " << r[c] << (c + 1 < r.size() ? std::string(width[c] - r[c].size() + 1, ' ') : "");
    }
    o << "\n";
  };
  line(cols);
  for (const auto& r : cells) line(r);
}

// Each rail's switch and port as LLDP named them (the neighbour's other TLVs are in --json).
void RenderCabling(const json& rails, std::ostringstream& o) {
  o << "  cabling:\n";
  for (const auto& r : rails) {
    o << "    rail " << r.value("rail", 0) << "  " << r.value("hca", "") << "  "
      << r.value("netdev", "") << " -> ";
    if (!r.contains("neighbor") || !r["neighbor"].is_object()) {
      o << "(no LLDP heard)\n";
      continue;
    }
    const json& n = r["neighbor"];
    o << r.value("switch", "") << " port " << r.value("port", "");
    if (n.value("portVlan", 0) != 0) o << "  vlan " << n.value("portVlan", 0);
    if (n.value("maxFrameSize", 0) != 0) o << "  max frame " << n.value("maxFrameSize", 0);
    o << "\n";
  }
}

}  // namespace

std::string Render(const View& v) {
  std::ostringstream o;
  o << "rdma-doctor " << v.name << "\n";
  if (v.doc.contains("hcas")) RenderHcas(v.doc["hcas"], o);
  if (v.doc.contains("matrix")) RenderMatrix(v.doc, o);
  if (v.doc.contains("lossless")) RenderLossless(v.doc["lossless"], o);
  if (v.doc.contains("cabling")) RenderCabling(v.doc["cabling"], o);
  for (const char* key : {"nodes", "netnsMode", "devicePlugin", "allocations", "draClaims",
                          "draTaints", "cniRecords", "netdevs", "devices", "env"}) {
    if (!v.doc.contains(key)) continue;
    json shown = v.doc[key];
    // The device plugin's HCA descriptions are long: their names say enough here (--json has all).
    if (std::string(key) == "env" && shown.contains(contract::kHcas)) {
      auto hcas = contract::DecodeHcas(shown[contract::kHcas].get<std::string>());
      std::string names;
      for (const auto& h : hcas ? *hcas : std::vector<contract::HcaInfo>{}) {
        names += (names.empty() ? "" : ",") + h.name;
      }
      shown[contract::kHcas] = hcas ? "[" + names + "]" : "(malformed: see the findings)";
    }
    RenderValue(key, shown, o);
  }
  if (v.doc.contains("gids") && !v.doc["gids"].empty()) RenderGids(v.doc["gids"], o);
  for (const auto& f : v.findings) {
    o << "  [" << internal::StatusName(f.status) << "] " << f.check << ": " << f.message << "\n";
    if (f.status != Status::kOk && !f.fix.empty()) o << "         fix: " << f.fix << "\n";
  }
  return o.str();
}

}  // namespace kuberdma::doctor
