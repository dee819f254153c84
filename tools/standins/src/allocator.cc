// SPDX-License-Identifier: Apache-2.0
// The stand-in allocator (allocator.h).
#include "kuberdma/standins/allocator.h"

#include <map>
#include <optional>

#include "kuberdma/dra/slices.h"

namespace kuberdma::standins {

namespace {

using json = nlohmann::json;

struct Device {
  std::string driver, pool, name, node;
  json attributes;
  json taints;  // the slice's device taints
  std::string key;
};

// One `a == b`, or `has(a)`, of a selector.
struct Term {
  bool driver = false;    // device.driver == value
  bool has = false;       // has(device.attributes["domain"].name)
  std::string attribute;  // "domain/name"
  json value;             // {"string": ..} / {"int": ..} / {"bool": ..}
  std::string expr;       // the whole expression, for errors
};

struct Request {
  std::string name;
  std::vector<Term> terms;  // the class's and the request's
  json tolerations = json::array();
  size_t count = 1;
  bool all = false;
};

struct Constraint {
  std::set<std::string> requests;  // empty: every request
  std::string attribute;
  bool Covers(const std::string& r) const { return requests.empty() || requests.contains(r); }
};

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.erase(0, 1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.pop_back();
  return s;
}

Result<json> Literal(const std::string& v, const std::string& expr) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    return json{{"string", v.substr(1, v.size() - 2)}};
  }
  if (v == "true" || v == "false") return json{{"bool", v == "true"}};
  if (!v.empty() && v.find_first_not_of("-0123456789") == std::string::npos) {
    return json{{"int", std::stoll(v)}};
  }
  return Fail(
      ErrorCode::kInvalidArgument,
      "selector `" + expr + "`: the stand-in allocator reads string, int and bool literals");
}

Result<Term> ParseAttribute(const std::string& lhs, const std::string& expr, Term t) {
  const std::string open = "device.attributes[\"";
  auto close = lhs.find("\"].");
  if (lhs.rfind(open, 0) != 0 || close == std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument,
                "selector `" + expr + "`: `" + lhs +
                    "` is not device.driver or device.attributes[\"domain\"].name");
  }
  t.attribute = lhs.substr(open.size(), close - open.size()) + "/" + lhs.substr(close + 3);
  t.expr = expr;
  return t;
}

Result<Term> ParseTerm(const std::string& raw, const std::string& expr) {
  std::string text = Trim(raw);
  if (text.starts_with("has(") && text.ends_with(")")) {
    return ParseAttribute(Trim(text.substr(4, text.size() - 5)), expr, Term{.has = true});
  }
  auto eq = text.find("==");
  if (eq == std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument,
                "selector `" + expr + "`: the stand-in allocator reads only `==` comparisons");
  }
  std::string lhs = Trim(text.substr(0, eq));
  KUBERDMA_ASSIGN_OR_RETURN(json value, Literal(Trim(text.substr(eq + 2)), expr));
  if (lhs == "device.driver") return Term{.driver = true, .value = value, .expr = expr};
  return ParseAttribute(lhs, expr, Term{.value = value});
}

Result<std::vector<Term>> ParseSelectors(const json& selectors) {
  std::vector<Term> out;
  for (const auto& s : selectors.is_array() ? selectors : json::array()) {
    std::string expr = s.value("cel", json::object()).value("expression", std::string());
    size_t pos = 0;
    while (pos <= expr.size()) {
      size_t end = expr.find("&&", pos);
      if (end == std::string::npos) end = expr.size();
      KUBERDMA_ASSIGN_OR_RETURN(Term t, ParseTerm(expr.substr(pos, end - pos), expr));
      out.push_back(std::move(t));
      pos = end + 2;
    }
  }
  return out;
}

// The attribute's value on `d` ({"string": ..}), or null. Attributes of the driver's own domain
// may be published bare.
json AttributeOf(const Device& d, const std::string& qualified) {
  if (d.attributes.contains(qualified)) return d.attributes[qualified];
  auto slash = qualified.find('/');
  if (qualified.substr(0, slash) == d.driver && d.attributes.contains(qualified.substr(slash + 1)))
    return d.attributes[qualified.substr(slash + 1)];
  return nullptr;
}

// `terms` (joined by &&) on `d` with CEL's semantics: false when any term is false; otherwise an
// error when any term names an attribute `d` lacks without has() (CEL's "no such key", which
// makes kube-scheduler fail the allocation); otherwise true.
Result<bool> Evaluate(const Device& d, const std::vector<Term>& terms) {
  std::optional<Error> missing;
  for (const auto& t : terms) {
    if (t.driver) {
      if (json{{"string", d.driver}} != t.value) return false;
      continue;
    }
    json v = AttributeOf(d, t.attribute);
    if (t.has) {
      if (v.is_null()) return false;
      continue;
    }
    if (v.is_null()) {
      if (!missing) {
        missing = Error(ErrorCode::kInvalidArgument,
                        "CEL runtime error in `" + t.expr + "` on device " + d.key +
                            ": no such key: " + t.attribute.substr(t.attribute.find('/') + 1) +
                            " (guard it with has(), as kube-scheduler fails the allocation)");
      }
      continue;
    }
    if (v != t.value) return false;
  }
  if (missing) return Fail(*missing);
  return true;
}

// Whether `taint` (a device taint) is tolerated by `tolerations` (a request's).
bool Tolerated(const json& taint, const json& tolerations) {
  return std::ranges::any_of(tolerations, [&](const json& t) {
    if (!t.is_object()) return false;
    std::string key = t.value("key", ""), op = t.value("operator", "Equal");
    std::string effect = t.value("effect", "");
    if (!effect.empty() && effect != taint.value("effect", "")) return false;
    if (key.empty()) return op == "Exists";
    if (key != taint.value("key", "")) return false;
    return op == "Exists" || t.value("value", "") == taint.value("value", "");
  });
}

// A device tainted NoSchedule or NoExecute is not allocated unless the request tolerates it.
bool Schedulable(const Device& d, const json& tolerations) {
  return std::ranges::all_of(d.taints, [&](const json& taint) {
    std::string effect = taint.is_object() ? taint.value("effect", "") : "";
    return (effect != "NoSchedule" && effect != "NoExecute") || Tolerated(taint, tolerations);
  });
}

// Devices of the newest generation of every pool, on a node.
std::vector<Device> DevicesOf(const std::vector<json>& slices) {
  std::map<std::string, int64_t> newest;
  auto pool_of = [](const json& s) {
    return s["spec"].value("driver", std::string()) + "/" + s["spec"]["pool"].value("name", "");
  };
  for (const auto& s : slices) {
    auto& g = newest[pool_of(s)];
    g = std::max(g, s["spec"]["pool"].value("generation", int64_t{0}));
  }
  std::vector<Device> out;
  for (const auto& s : slices) {
    const json& spec = s["spec"];
    if (spec["pool"].value("generation", int64_t{0}) != newest[pool_of(s)]) continue;
    for (const auto& d : spec.value("devices", json::array())) {
      Device dev{.driver = spec.value("driver", ""),
                 .pool = spec["pool"].value("name", ""),
                 .name = d.value("name", ""),
                 .node = spec.value("nodeName", ""),
                 .attributes = d.value("attributes", json::object()),
                 .taints = d.value("taints", json::array())};
      dev.key = DeviceKey(dev.driver, dev.pool, dev.name);
      out.push_back(std::move(dev));
    }
  }
  return out;
}

// The backtracking search over one node's devices.
class Search {
 public:
  Search(const std::vector<Request>& requests, const std::vector<Constraint>& constraints,
         std::vector<const Device*> devices)
      : requests_(requests),
        constraints_(constraints),
        devices_(std::move(devices)),
        fixed_(constraints.size()) {}

  // Each request's selectors on each device, as kube-scheduler evaluates them before it
  // searches: an evaluation error (a missing attribute) fails the whole allocation.
  Result<void> Evaluate() {
    for (const auto& req : requests_) {
      for (const Device* d : devices_) {
        KUBERDMA_ASSIGN_OR_RETURN(bool ok, standins::Evaluate(*d, req.terms));
        if (ok && Schedulable(*d, req.tolerations)) fits_.insert({req.name, d->key});
      }
    }
    return {};
  }
  bool Run() { return Fill(0, 0, 0); }
  // The chosen devices with their request names, in request order.
  std::vector<std::pair<std::string, const Device*>> chosen() const { return chosen_; }

 private:
  // Request `r`, having chosen `have` of its devices, trying candidates from `from`.
  bool Fill(size_t r, size_t have, size_t from) {
    if (r == requests_.size()) return true;
    const Request& req = requests_[r];
    size_t want = req.all ? Candidates(req) : req.count;
    if (want == 0 && req.all) return false;  // All needs at least one device
    if (have == want) return Fill(r + 1, 0, 0);
    for (size_t i = from; i < devices_.size(); ++i) {
      const Device* d = devices_[i];
      if (used_.contains(d->key) || !Matches(*d, req)) continue;
      auto saved = fixed_;
      if (!Fix(req.name, *d)) continue;
      used_.insert(d->key);
      chosen_.emplace_back(req.name, d);
      if (Fill(r, have + 1, i + 1)) return true;
      chosen_.pop_back();
      used_.erase(d->key);
      fixed_ = saved;
    }
    return false;
  }
  size_t Candidates(const Request& req) const {
    return static_cast<size_t>(
        std::ranges::count_if(devices_, [&](const Device* d) { return Matches(*d, req); }));
  }
  bool Matches(const Device& d, const Request& req) const {
    return fits_.contains({req.name, d.key});
  }
  // Whether `d` agrees with every constraint over `request` so far; fixes the values it sets.
  bool Fix(const std::string& request, const Device& d) {
    for (size_t c = 0; c < constraints_.size(); ++c) {
      if (!constraints_[c].Covers(request)) continue;
      json v = AttributeOf(d, constraints_[c].attribute);
      if (v.is_null()) return false;  // a device without the attribute cannot match it
      if (fixed_[c].is_null()) {
        fixed_[c] = v;
      } else if (fixed_[c] != v) {
        return false;
      }
    }
    return true;
  }

  const std::vector<Request>& requests_;
  const std::vector<Constraint>& constraints_;
  std::vector<const Device*> devices_;
  std::vector<json> fixed_;
  std::set<std::pair<std::string, std::string>> fits_;  // (request, device key)
  std::set<std::string> used_;
  std::vector<std::pair<std::string, const Device*>> chosen_;
};

Result<std::vector<Request>> RequestsOf(const json& spec, const std::vector<json>& classes) {
  std::vector<Request> out;
  for (const auto& r : spec.value("requests", json::array())) {
    if (!r.contains("exactly")) {
      return Fail(ErrorCode::kInvalidArgument,
                  "request " + r.value("name", std::string()) +
                      ": the stand-in allocator reads only `exactly` requests");
    }
    const json& ex = r["exactly"];
    std::string cls = ex.value("deviceClassName", "");
    auto it = std::ranges::find_if(
        classes, [&](const json& c) { return c["metadata"].value("name", "") == cls; });
    if (it == classes.end()) {
      return Fail(ErrorCode::kInvalidArgument,
                  "request " + r.value("name", std::string()) + ": no DeviceClass " + cls);
    }
    Request req{.name = r.value("name", ""),
                .count = static_cast<size_t>(ex.value("count", 1)),
                .all = ex.value("allocationMode", "ExactCount") == "All"};
    KUBERDMA_ASSIGN_OR_RETURN(req.terms, ParseSelectors((*it)["spec"].value("selectors", json())));
    KUBERDMA_ASSIGN_OR_RETURN(auto own, ParseSelectors(ex.value("selectors", json())));
    req.tolerations = ex.value("tolerations", json::array());
    req.terms.insert(req.terms.end(), own.begin(), own.end());
    out.push_back(std::move(req));
  }
  return out;
}

std::vector<Constraint> ConstraintsOf(const json& spec) {
  std::vector<Constraint> out;
  for (const auto& c : spec.value("constraints", json::array())) {
    if (!c.contains("matchAttribute")) continue;
    Constraint k{.attribute = c.value("matchAttribute", "")};
    for (const auto& r : c.value("requests", json::array()))
      k.requests.insert(r.get<std::string>());
    out.push_back(std::move(k));
  }
  return out;
}

json AllocationOf(const Search& s, const std::string& node, const json& spec) {
  json results = json::array();
  for (const auto& [request, d] : s.chosen()) {
    results.push_back(
        {{"request", request}, {"driver", d->driver}, {"pool", d->pool}, {"device", d->name}});
  }
  json config = json::array();
  for (auto c : spec.value("config", json::array())) {
    c["source"] = "FromClaim";
    config.push_back(c);
  }
  json devices = {{"results", results}};
  if (!config.empty()) devices["config"] = config;
  return {{"devices", devices},
          {"nodeSelector",
           {{"nodeSelectorTerms",
             json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                         {"operator", "In"},
                                                         {"values", json::array({node})}}})}}})}}}};
}

}  // namespace

std::string DeviceKey(const std::string& driver, const std::string& pool,
                      const std::string& device) {
  return driver + "/" + pool + "/" + device;
}

Result<bool> EvaluateSelector(const std::string& expression, const std::string& driver,
                              const json& device) {
  KUBERDMA_ASSIGN_OR_RETURN(auto terms,
                            ParseSelectors(json::array({{{"cel", {{"expression", expression}}}}})));
  Device d{.driver = driver,
           .name = device.value("name", ""),
           .attributes = device.value("attributes", json::object())};
  d.key = driver + "/" + d.name;
  return Evaluate(d, terms);
}

Result<json> Allocate(const json& claim, const std::vector<json>& slices,
                      const std::vector<json>& classes, const std::set<std::string>& in_use) {
  const json spec = claim.value("spec", json::object()).value("devices", json::object());
  KUBERDMA_ASSIGN_OR_RETURN(auto requests, RequestsOf(spec, classes));
  auto constraints = ConstraintsOf(spec);
  std::vector<Device> all = DevicesOf(slices);
  std::set<std::string> nodes;
  for (const auto& d : all) nodes.insert(d.node);
  for (const auto& node : nodes) {
    std::vector<const Device*> here;
    for (const auto& d : all) {
      if (d.node == node && !in_use.contains(d.key)) here.push_back(&d);
    }
    Search s(requests, constraints, here);
    KUBERDMA_TRY(s.Evaluate());
    if (s.Run()) return AllocationOf(s, node, spec);
  }
  std::string what;
  for (const auto& c : constraints) what += (what.empty() ? "" : ", ") + c.attribute;
  return Fail(ErrorCode::kNotFound,
              "claim " + claim.value("metadata", json::object()).value("name", std::string()) +
                  " cannot be satisfied on any of " + std::to_string(nodes.size()) +
                  " node(s): no free devices match every request" +
                  (what.empty() ? "" : " with the same " + what + " where constrained"));
}

json StandInGpuSlice(const std::string& node, const std::vector<sysfs::Gpu>& gpus) {
  json devices = json::array();
  for (size_t i = 0; i < gpus.size(); ++i) {
    devices.push_back(
        {{"name", "gpu-" + std::to_string(i)},
         {"attributes",
          {{"resource.kubernetes.io/pcieRoot", {{"string", dra::PcieRoot(gpus[i].device_path)}}},
           {"gpu.nvidia.com/type", {{"string", "gpu"}}},
           {"gpu.nvidia.com/uuid", {{"string", "GPU-standin-" + std::to_string(i)}}},
           {"gpu.nvidia.com/productName", {{"string", "NVIDIA H200"}}},
           {"gpu.nvidia.com/pcieBusID", {{"string", gpus[i].address}}}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.nvidia.com"}}},
          {"spec",
           {{"driver", "gpu.nvidia.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

std::set<std::string> AllocatedKeys(const json& allocation) {
  std::set<std::string> out;
  for (const auto& r :
       allocation.value("devices", json::object()).value("results", json::array())) {
    out.insert(DeviceKey(r.value("driver", ""), r.value("pool", ""), r.value("device", "")));
  }
  return out;
}

}  // namespace kuberdma::standins
