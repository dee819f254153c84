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

Result<void> IsFleetReport(const json& j, const char* what) {
  if (!j.is_object() || Text(j, "kind") != "kuberdma-acceptance" || !j.contains("nodes") ||
      !j["nodes"].is_array()) {
    return Fail(
        ErrorCode::kInvalidArgument,
        std::string(what) +
            " is not a kuberdma-acceptance report (rdma-validate --mode acceptance --json)");
  }
  return {};
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

std::string CulpritFor(const Page& p, const std::string& node, int rail) {
  std::string why;
  for (const CellKey& k : {CellKey{node, rail}, CellKey{node, 0}, CellKey{"", rail}}) {
    auto it = p.culprits.find(k);
    if (it != p.culprits.end()) why += (why.empty() ? "" : "; ") + it->second;
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
  evidence += ": pair busbw " + Fixed(it->second) + " GB/s, " + Fixed(ratio) + "x the fleet median";
  if (!why.empty()) evidence += "; " + why;
  return "<td class=\"cell" + std::string(why.empty() ? "" : " culprit") + "\"" + attrs +
         " data-ratio=\"" + Fixed(ratio, 3) + "\" style=\"background:" + Colour(ratio) +
         "\" data-evidence=\"" + Escape(evidence) + "\" title=\"" + Escape(evidence) + "\">" +
         Fixed(it->second) + "<span class=\"ratio\">" + Fixed(ratio) + "&times;</span>" +
         (p.has_baseline ? Delta(p.base, {name, rail}, it->second) : "") + "</td>";
}

std::string Row(const Page& p, const json& node) {
  std::string name = Text(node, "name");
  std::string verdict = Text(node, "verdict");
  std::string o = "<tr><th class=\"node\">" + Escape(name) + " <span class=\"" +
                  (verdict == "pass" ? "pass" : "fail") + "\">" + Escape(verdict) + "</span></th>";
  const json none = json::object();
  for (int r = 1; r <= p.rails; ++r) {
    const json* hca = &none;
    if (node.contains("hcas") && node["hcas"].is_array()) {
      for (const auto& h : node["hcas"])
        if (Number(h, "rail") && static_cast<int>(*Number(h, "rail")) == r) hca = &h;
    }
    o += Cell(p, node, *hca, r);
  }
  auto it = p.cells.find({name, 0});
  o += "<td>" + (it == p.cells.end() ? std::string("&ndash;") : Fixed(it->second)) +
       (it != p.cells.end() && p.has_baseline ? Delta(p.base, {name, 0}, it->second) : "") +
       "</td></tr>\n";
  return o;
}

std::string Header(const Page& p) {
  const json& r = p.report;
  std::string verdict = Text(r, "verdict");
  std::string collective = r.contains("collective") ? Text(r["collective"], "name") : "";
  auto ring = r.contains("ring") ? Number(r["ring"], "busbwGBps") : std::nullopt;
  std::string o = "<h1>Fleet acceptance: <span class=\"" +
                  std::string(verdict == "pass" ? "pass" : "fail") + R"(" id="verdict">)" +
                  Escape(verdict) + "</span></h1>\n<p class=\"meta\">" + Escape(Text(r, "date")) +
                  " &middot; " + std::to_string(r["nodes"].size()) + " nodes &middot; " +
                  Escape(Text(r, "transport")) + " &middot; NCCL " +
                  Escape(Text(r, "ncclVersion")) + " &middot; " + Escape(collective) +
                  " &middot; ring busbw " + (ring ? Fixed(*ring) : std::string("?")) +
                  " GB/s &middot; fleet median pair busbw " + Fixed(p.median) + " GB/s</p>\n";
  if (p.has_baseline) o += "<p class=\"meta\">Compared with a baseline report.</p>\n";
  return o;
}

std::string Heatmap(const Page& p) {
  std::string o =
      "<h2>Pair busbw per node and rail (GB/s; colour: the ratio to the fleet median)</h2>\n"
      "<table id=\"heatmap\"><tr><th class=\"node\">node</th>";
  for (int r = 1; r <= p.rails; ++r) o += "<th>rail " + std::to_string(r) + "</th>";
  o += "<th>node busbw</th></tr>\n";
  for (const auto& n : p.report["nodes"]) o += Row(p, n);
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
             (ok && b ? Fixed(*b) : "failed " + Escape(Text(m, "error"))) + "</td>";
      }
      o += "</tr>\n";
    }
  }
  return o + "</table>\n";
}

int Rails(const json& report) {
  int rails = 0;
  for (const auto& n : report["nodes"]) {
    if (n.contains("hcas") && n["hcas"].is_array())
      rails = std::max(rails, static_cast<int>(n["hcas"].size()));
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
         List(report, "problems", "Problems") + List(report, "notes", "Notes") + Rounds(report) +
         "<script>" + kScript + "</script>\n</body></html>\n";
}

}  // namespace kuberdma::validator
