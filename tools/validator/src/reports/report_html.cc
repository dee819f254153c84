// SPDX-License-Identifier: Apache-2.0
#include "kuberdma/validator/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kuberdma::validator {

namespace {

using nlohmann::json;

// Keyed by (node name, rail); a rail of 0 or a node of "" stands for "every".
using CellKey = std::pair<std::string, int>;

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#555}.pass{color:#1a7f37}.fail{color:#cf222e}
table{border-collapse:collapse}th,td{padding:4px 8px;border:1px solid #d0d7de;text-align:center}
th.node{text-align:left}td.cell{min-width:72px;cursor:pointer}td.none{background:#f6f8fa;color:#999}
td.culprit{outline:3px solid #cf222e;outline-offset:-3px;font-weight:600}
.ratio,.delta{display:block;font-size:11px;color:#333}.delta.down{color:#cf222e}.delta.up{color:#1a7f37}
#detail{margin-top:12px;padding:8px;border:1px solid #d0d7de;min-height:20px;background:#f6f8fa}
.legend span{display:inline-block;width:60px;text-align:center;font-size:11px}
)";

// Clicking a cell shows its evidence; nothing is loaded from anywhere.
constexpr const char* kScript = R"(
document.querySelectorAll('td.cell').forEach(function(td){td.addEventListener('click',function(){
document.getElementById('detail').textContent=td.getAttribute('data-evidence');});});
document.body.setAttribute('data-culprit-cells',document.querySelectorAll('td.culprit').length);
document.body.setAttribute('data-ready','1');
)";

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Fixed(double v, int precision = 2) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

// A bandwidth: two decimals, four below 0.1 GB/s (an emulated fabric's figures, a policed rail).
std::string Gbps(double v) { return Fixed(v, v > 0 && v < 0.1 ? 4 : 2); }

std::optional<double> Number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::string Text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A red (ratio <= 0.5) to green (>= 1) background for a cell's ratio to the fleet median.
std::string Colour(double ratio) {
  double t = std::clamp((ratio - 0.5) / 0.5, 0.0, 1.0);
  return "hsl(" + Fixed(120 * t, 0) + ",70%," + Fixed(88 - 10 * (1 - t), 0) + "%)";
}

// The fields the page reads, each of the type it reads it as: a report that holds another names
// the field (`nodes[2].hcas[0].rail is string, not a number`), never a bare "internal error".
class Shape {
 public:
  explicit Shape(std::string what) : what_(std::move(what)) {}
  // `j[key]`, when present, is of `type` ("string", "number", "boolean", "object", "array").
  bool Field(const json& j, const std::string& path, const char* key, const char* type) {
    if (!j.is_object() || !j.contains(key) || j[key].is_null()) return true;
    return Is(j[key], path + (path.empty() ? "" : ".") + key, type);
  }
  bool Is(const json& v, const std::string& path, const char* type) {
    std::string t = type;
    bool ok = (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
              (t == "boolean" && v.is_boolean()) || (t == "object" && v.is_object()) ||
              (t == "array" && v.is_array());
    if (!ok && error_.empty()) {
      error_ = what_ + ": " + path + " is " + std::string(v.type_name()) + ", not " +
               (t == "object" || t == "array" ? "an " : "a ") + t;
    }
    return ok;
  }
  const std::string& error() const { return error_; }

 private:
  std::string what_;
  std::string error_;
};

void CheckCabling(const json& n, const std::string& at, Shape& s) {
  if (!s.Field(n, at, "cabling", "array") || !n.contains("cabling")) return;
  for (size_t c = 0; c < n["cabling"].size(); ++c) {
    std::string ac = at + ".cabling[" + std::to_string(c) + "]";
    if (!s.Is(n["cabling"][c], ac, "object")) return;
    for (const char* k : {"hca", "netdev", "switch", "port", "finding"})
      s.Field(n["cabling"][c], ac, k, "string");
    s.Field(n["cabling"][c], ac, "rail", "number");
  }
}

void CheckNodes(const json& r, Shape& s) {
  for (size_t i = 0; i < r["nodes"].size(); ++i) {
    const json& n = r["nodes"][i];
    std::string at = "nodes[" + std::to_string(i) + "]";
    if (!s.Is(n, at, "object")) return;
    for (const char* k : {"name", "verdict"}) s.Field(n, at, k, "string");
    s.Field(n, at, "busbwGBps", "number");
    CheckCabling(n, at, s);
    if (!s.Field(n, at, "hcas", "array") || !n.contains("hcas")) continue;
    for (size_t h = 0; h < n["hcas"].size(); ++h) {
      std::string ah = at + ".hcas[" + std::to_string(h) + "]";
      if (!s.Is(n["hcas"][h], ah, "object")) return;
      s.Field(n["hcas"][h], ah, "name", "string");
      for (const char* k : {"rail", "busbwGBps"}) s.Field(n["hcas"][h], ah, k, "number");
    }
  }
}

void CheckLists(const json& r, Shape& s) {
  for (const char* list : {"culprits", "problems", "notes"}) {
    if (!s.Field(r, "", list, "array") || !r.contains(list)) continue;
    for (size_t i = 0; i < r[list].size(); ++i) {
      const json& x = r[list][i];
      std::string at = std::string(list) + "[" + std::to_string(i) + "]";
      if (x.is_string()) continue;
      if (!s.Is(x, at, "object")) return;
      for (const char* k : {"node", "hca", "why"}) s.Field(x, at, k, "string");
      s.Field(x, at, "rail", "number");
      s.Field(x, at, "certain", "boolean");
    }
  }
}

void CheckRounds(const json& r, Shape& s) {
  if (!s.Field(r, "", "rounds", "array") || !r.contains("rounds")) return;
  for (size_t i = 0; i < r["rounds"].size(); ++i) {
    const json& round = r["rounds"][i];
    std::string at = "rounds[" + std::to_string(i) + "]";
    if (!s.Is(round, at, "object")) return;
    s.Field(round, at, "round", "number");
    if (!s.Field(round, at, "pairs", "array") || !round.contains("pairs")) continue;
    for (size_t p = 0; p < round["pairs"].size(); ++p) {
      const json& pair = round["pairs"][p];
      std::string ap = at + ".pairs[" + std::to_string(p) + "]";
      if (!s.Is(pair, ap, "object")) return;
      for (const char* k : {"a", "b"}) s.Field(pair, ap, k, "string");
      if (!s.Field(pair, ap, "rails", "array") || !pair.contains("rails")) continue;
      for (size_t m = 0; m < pair["rails"].size(); ++m) {
        std::string am = ap + ".rails[" + std::to_string(m) + "]";
        if (!s.Is(pair["rails"][m], am, "object")) return;
        s.Field(pair["rails"][m], am, "busbwGBps", "number");
        s.Field(pair["rails"][m], am, "ok", "boolean");
        s.Field(pair["rails"][m], am, "error", "string");
      }
    }
  }
}

// What the page can draw: a rail is a column, so rail numbers are 1..kMaxRails; at most kMaxNodes
// rows. Past either the report is refused, naming the field, so the page stays linear in the
// report (each node's row at most kMaxRails cells).
Result<void> CheckBounds(const json& r, const char* what) {
  if (r["nodes"].size() > kMaxNodes) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string(what) + ": " + std::to_string(r["nodes"].size()) +
                    " nodes; a page shows at most " + std::to_string(kMaxNodes) +
                    " (split the fleet's report by rack or rail)");
  }
  for (size_t i = 0; i < r["nodes"].size(); ++i) {
    const json& n = r["nodes"][i];
    if (!n.contains("hcas")) continue;
    for (size_t h = 0; h < n["hcas"].size(); ++h) {
      auto rail = Number(n["hcas"][h], "rail");
      if (rail && (*rail < 1 || *rail > kMaxRails || *rail != std::floor(*rail))) {
        return Fail(ErrorCode::kInvalidArgument,
                    std::string(what) + ": nodes[" + std::to_string(i) + "].hcas[" +
                        std::to_string(h) + "].rail is " + Fixed(*rail, 0) +
                        ": rails are numbered 1 to " + std::to_string(kMaxRails));
      }
    }
  }
  return {};
}

Result<void> IsFleetReport(const json& j, const char* what) {
  if (!j.is_object() || Text(j, "kind") != "kuberdma-acceptance" || !j.contains("nodes") ||
      !j["nodes"].is_array()) {
    return Fail(
        ErrorCode::kInvalidArgument,
        std::string(what) +
            " is not a kuberdma-acceptance report (rdma-validate --mode acceptance --json)");
  }
  Shape s(what);
  for (const char* k : {"date", "transport", "ncclVersion", "verdict"}) s.Field(j, "", k, "string");
  s.Field(j, "", "fleetMedianGBps", "number");
  if (s.Field(j, "", "ring", "object"))
    s.Field(j.value("ring", json::object()), "ring", "busbwGBps", "number");
  if (s.Field(j, "", "collective", "object")) {
    s.Field(j.value("collective", json::object()), "collective", "name", "string");
  }
  CheckNodes(j, s);
  CheckLists(j, s);
  CheckRounds(j, s);
  if (!s.error().empty()) return Fail(ErrorCode::kInvalidArgument, s.error());
  return CheckBounds(j, what);
}

// Each node's and rail's busbw in a report: (name, rail) -> GB/s, (name, 0) -> the node's.
std::map<CellKey, double> Cells(const json& report) {
  std::map<CellKey, double> out;
  for (const auto& n : report["nodes"]) {
    std::string name = Text(n, "name");
    if (auto b = Number(n, "busbwGBps")) out[{name, 0}] = *b;
    if (!n.contains("hcas") || !n["hcas"].is_array()) continue;
    for (const auto& h : n["hcas"]) {
      auto rail = Number(h, "rail");
      auto b = Number(h, "busbwGBps");
      if (rail && b) out[{name, static_cast<int>(*rail)}] = *b;
    }
  }
  return out;
}

// The culprits by cell, with their evidence; a whole row or column under "every".
std::map<CellKey, std::string> Culprits(const json& report) {
  std::map<CellKey, std::string> out;
  if (!report.contains("culprits") || !report["culprits"].is_array()) return out;
  for (const auto& c : report["culprits"]) {
    std::string node =
        c.contains("node") && c["node"].is_string() ? c["node"].get<std::string>() : "";
    int rail = Number(c, "rail") ? static_cast<int>(*Number(c, "rail")) : 0;
    std::string& why = out[{node, rail}];
    why += (why.empty() ? "" : "; ") +
           std::string(c.value("certain", false) ? "culprit: " : "suspect: ") + Text(c, "why");
  }
  return out;
}

std::string Delta(const std::map<CellKey, double>& base, const CellKey& k, double now) {
  auto it = base.find(k);
  if (it == base.end() || it->second <= 0) return "";
  double d = (now - it->second) / it->second;
  double pct = std::round(100 * d);
  std::string cls = d < -0.05 ? " down" : (d > 0.05 ? " up" : "");
  return "<span class=\"delta" + cls + "\">" + (pct > 0 ? "+" : (pct < 0 ? "" : "&plusmn;")) +
         Fixed(pct == 0 ? 0 : pct, 0) + "% vs baseline</span>";
}

struct Page {
  const json& report;
  std::map<CellKey, double> cells, base;
  std::map<CellKey, std::string> culprits;
  double median = 0;
  int rails = 0;
  bool has_baseline = false;
};

// At most this much of a culprit's words in a cell (the list below the table has them whole).
constexpr size_t kCellWords = 400;

// What marks a cell: a culprit of this cell or this node (its words, at most kCellWords: a row is
// at most kMaxRails cells), or of this rail on every node (a reference only: a column is every
// node, and repeating its words there would make the page grow with nodes x words).
std::string CulpritFor(const Page& p, const std::string& node, int rail) {
  std::string why;
  for (const CellKey& k : {CellKey{node, rail}, CellKey{node, 0}}) {
    auto it = p.culprits.find(k);
    if (it == p.culprits.end()) continue;
    std::string words = it->second.size() > kCellWords
                            ? it->second.substr(0, kCellWords) + "... (the list below has it all)"
                            : it->second;
    why += (why.empty() ? "" : "; ") + words;
  }
  if (p.culprits.contains({"", rail})) {
    why += (why.empty() ? "" : "; ") + std::string("rail ") + std::to_string(rail) +
           " is named on every node: see Culprits and evidence";
  }
  return why;
}

std::string Cell(const Page& p, const json& node, const json& hca, int rail) {
  std::string name = Text(node, "name");
  std::string why = CulpritFor(p, name, rail);
  auto it = p.cells.find({name, rail});
  std::string attrs = " data-node=\"" + Escape(name) + "\" data-rail=\"" + std::to_string(rail) +
                      "\" data-hca=\"" + Escape(Text(hca, "name")) + "\"";
  std::string evidence = name + " rail " + std::to_string(rail) + " (" + Text(hca, "name") + ")";
  if (it == p.cells.end()) {
    return "<td class=\"cell none" + std::string(why.empty() ? "" : " culprit") + "\"" + attrs +
           " data-evidence=\"" +
           Escape(evidence + ": not measured" + (why.empty() ? "" : "; ") + why) +
           "\">&ndash;</td>";
  }
  double ratio = p.median > 0 ? it->second / p.median : 0;
  evidence += ": pair busbw " + Gbps(it->second) + " GB/s, " + Fixed(ratio) + "x the fleet median";
  if (!why.empty()) evidence += "; " + why;
  return "<td class=\"cell" + std::string(why.empty() ? "" : " culprit") + "\"" + attrs +
         " data-ratio=\"" + Fixed(ratio, 3) + "\" style=\"background:" + Colour(ratio) +
         "\" data-evidence=\"" + Escape(evidence) + "\">" + Gbps(it->second) +
         "<span class=\"ratio\">" + Fixed(ratio) + "&times;</span>" +
         (p.has_baseline ? Delta(p.base, {name, rail}, it->second) : "") + "</td>";
}

bool HasCabling(const json& node) {
  return node.contains("cabling") && node["cabling"].is_array() && !node["cabling"].empty();
}

// A node's cabling: whether any rail is on another switch than the fleet's, and its anchor.
bool Miscabled(const json& node) {
  if (!HasCabling(node)) return false;
  for (const auto& r : node["cabling"]) {
    if (r.is_object() && !Text(r, "finding").empty()) return true;
  }
  return false;
}

std::string CablingAnchor(size_t index) { return "cabling-" + std::to_string(index); }

std::string Row(const Page& p, const json& node, size_t index) {
  std::string name = Text(node, "name");
  std::string verdict = Text(node, "verdict");
  std::string o = "<tr><th class=\"node\">" + Escape(name) + " <span class=\"" +
                  (verdict == "pass" ? "pass" : "fail") + "\">" + Escape(verdict) + "</span>";
  if (HasCabling(node)) {
    o += " <a class=\"cabling" + std::string(Miscabled(node) ? " fail" : "") + "\" href=\"#" +
         CablingAnchor(index) + "\">cabling</a>";
  }
  o += "</th>";
  static const json kNone = json::object();
  // Each HCA by its rail, in one pass (the last of a rail wins, as in the cells' map).
  std::vector<const json*> by_rail(static_cast<size_t>(p.rails) + 1, &kNone);
  if (node.contains("hcas") && node["hcas"].is_array()) {
    for (const auto& h : node["hcas"]) {
      auto rail = Number(h, "rail");
      if (rail && *rail >= 1 && *rail <= p.rails) by_rail[static_cast<size_t>(*rail)] = &h;
    }
  }
  for (int r = 1; r <= p.rails; ++r) o += Cell(p, node, *by_rail[static_cast<size_t>(r)], r);
  auto it = p.cells.find({name, 0});
  o += "<td>" + (it == p.cells.end() ? std::string("&ndash;") : Gbps(it->second)) +
       (it != p.cells.end() && p.has_baseline ? Delta(p.base, {name, 0}, it->second) : "") +
       "</td></tr>\n";
  return o;
}

std::string Header(const Page& p) {
  const json& r = p.report;
  std::string verdict = Text(r, "verdict");
  std::string collective = r.contains("collective") ? Text(r["collective"], "name") : "";
  auto ring = r.contains("ring") ? Number(r["ring"], "busbwGBps") : std::nullopt;
  // The verbs rail sweep has no NCCL and no ring: its figures are RDMA writes per rail.
  bool sweep = Text(r, "transport") == "verbs";
  std::string o = "<h1>Fleet acceptance: <span class=\"" +
                  std::string(verdict == "pass" ? "pass" : "fail") + R"(" id="verdict">)" +
                  Escape(verdict) + "</span></h1>\n<p class=\"meta\">" + Escape(Text(r, "date")) +
                  " &middot; " + std::to_string(r["nodes"].size()) + " nodes &middot; " +
                  Escape(Text(r, "transport")) +
                  (sweep ? " &middot; rail sweep (RDMA writes, no NCCL)"
                         : " &middot; NCCL " + Escape(Text(r, "ncclVersion")) + " &middot; " +
                               Escape(collective) + " &middot; ring busbw " +
                               (ring ? Fixed(*ring) : std::string("?")) + " GB/s") +
                  " &middot; fleet median pair " + (sweep ? "RDMA write " : "busbw ") +
                  Gbps(p.median) + " GB/s</p>\n";
  if (p.has_baseline) o += "<p class=\"meta\">Compared with a baseline report.</p>\n";
  return o;
}

std::string Heatmap(const Page& p) {
  std::string o =
      "<h2>Pair busbw per node and rail (GB/s; colour: the ratio to the fleet median)</h2>\n"
      "<table id=\"heatmap\"><tr><th class=\"node\">node</th>";
  for (int r = 1; r <= p.rails; ++r) o += "<th>rail " + std::to_string(r) + "</th>";
  o += "<th>node busbw</th></tr>\n";
  for (size_t i = 0; i < p.report["nodes"].size(); ++i) o += Row(p, p.report["nodes"][i], i);
  o += "</table>\n<p class=\"legend\">";
  for (double ratio : {0.5, 0.7, 0.8, 0.9, 1.0})
    o += "<span style=\"background:" + Colour(ratio) + "\">" + Fixed(ratio, 1) + "&times;</span>";
  return o + "</p>\n<div id=\"detail\">Click a cell for its evidence.</div>\n";
}

std::string List(const json& r, const char* key, const char* title) {
  if (!r.contains(key) || !r[key].is_array() || r[key].empty()) return "";
  std::string o = "<h2>" + std::string(title) + "</h2>\n<ul id=\"" + key + "\">";
  for (const auto& x : r[key]) {
    if (x.is_string()) {
      o += "<li>" + Escape(x.get<std::string>()) + "</li>";
    } else if (x.is_object()) {
      std::string node =
          x.contains("node") && x["node"].is_string() ? x["node"].get<std::string>() : "every node";
      std::string rail = Number(x, "rail") ? "rail " + Fixed(*Number(x, "rail"), 0) : "every rail";
      o += "<li><b>" + std::string(x.value("certain", false) ? "culprit" : "suspect") + "</b> " +
           Escape(node) + ", " + Escape(rail) +
           (Text(x, "hca").empty() ? "" : " (" + Escape(Text(x, "hca")) + ")") + ": " +
           Escape(Text(x, "why")) + "</li>";
    }
  }
  return o + "</ul>\n";
}

// Each node's rails as LLDP heard them (the node's device plugin, --cabling), a rail on another
// switch than the fleet's marked; the heatmap's node cells link here.
std::string Cabling(const json& r) {
  std::string rows;
  for (size_t i = 0; i < r["nodes"].size(); ++i) {
    const json& n = r["nodes"][i];
    if (!HasCabling(n)) continue;
    rows += "<tr id=\"" + CablingAnchor(i) + "\"><th class=\"node\" rowspan=\"" +
            std::to_string(n["cabling"].size()) + "\">" + Escape(Text(n, "name")) + "</th>";
    bool first = true;
    for (const auto& c : n["cabling"]) {
      if (!c.is_object()) continue;
      std::string finding = Text(c, "finding");
      auto rail = Number(c, "rail");
      rows += std::string(first ? "" : "<tr>") + "<td>" + (rail ? Fixed(*rail, 0) : "?") +
              "</td><td>" + Escape(Text(c, "hca")) + "</td><td>" + Escape(Text(c, "netdev")) +
              "</td><td" + (finding.empty() ? "" : " class=\"fail miscabled\"") + ">" +
              Escape(Text(c, "switch")) + "</td><td>" + Escape(Text(c, "port")) + "</td><td>" +
              Escape(finding) + "</td></tr>\n";
      first = false;
    }
  }
  if (rows.empty()) return "";
  return "<h2>Cabling (each rail's LLDP neighbour, held to the fleet's switch for that rail)</h2>\n"
         "<table id=\"cabling\"><tr><th>node</th><th>rail</th><th>HCA</th><th>netdev</th>"
         "<th>switch</th><th>port</th><th>finding</th></tr>\n" +
         rows + "</table>\n";
}

std::string Rounds(const json& r) {
  if (!r.contains("rounds") || !r["rounds"].is_array() || r["rounds"].empty()) return "";
  std::string o = "<h2>Pair rounds (GB/s per rail)</h2>\n<table id=\"rounds\">";
  for (const auto& round : r["rounds"]) {
    for (const auto& pair : round.value("pairs", json::array())) {
      o += "<tr><td>round " + std::to_string(round.value("round", 0)) + "</td><td>" +
           Escape(Text(pair, "a")) + " + " + Escape(Text(pair, "b")) + "</td>";
      for (const auto& m : pair.value("rails", json::array())) {
        auto b = Number(m, "busbwGBps");
        bool ok = m.value("ok", false);
        o += "<td" + std::string(ok ? "" : " class=\"fail\"") + ">" +
             (ok && b ? Gbps(*b) : "failed " + Escape(Text(m, "error"))) + "</td>";
      }
      o += "</tr>\n";
    }
  }
  return o + "</table>\n";
}

// The columns: the highest rail any HCA is on, or, for HCAs without a rail, their count; never
// more than kMaxRails (CheckBounds refused higher rail numbers).
int Rails(const json& report) {
  int rails = 0;
  for (const auto& n : report["nodes"]) {
    if (!n.contains("hcas") || !n["hcas"].is_array()) continue;
    rails = std::max(rails, static_cast<int>(std::min<size_t>(n["hcas"].size(), kMaxRails)));
    for (const auto& h : n["hcas"]) {
      if (auto r = Number(h, "rail")) rails = std::max(rails, static_cast<int>(*r));
    }
  }
  return rails;
}

}  // namespace

Result<std::string> FleetReportHtml(const json& report, const json* baseline) {
  KUBERDMA_TRY(IsFleetReport(report, "the report"));
  if (baseline != nullptr) KUBERDMA_TRY(IsFleetReport(*baseline, "the baseline"));
  Page p{.report = report,
         .cells = Cells(report),
         .base = baseline != nullptr ? Cells(*baseline) : std::map<CellKey, double>{},
         .culprits = Culprits(report),
         .median = Number(report, "fleetMedianGBps").value_or(0),
         .rails = Rails(report),
         .has_baseline = baseline != nullptr};
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kube-rdma "
         "fleet acceptance " +
         Escape(Text(report, "date")) + "</title>\n<style>" + kStyle + "</style></head>\n<body>\n" +
         Header(p) + Heatmap(p) + List(report, "culprits", "Culprits and evidence") +
         List(report, "problems", "Problems") + List(report, "notes", "Notes") + Cabling(report) +
         Rounds(report) + "<script>" + kScript + "</script>\n</body></html>\n";
}

}  // namespace kuberdma::validator
