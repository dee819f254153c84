// SPDX-License-Identifier: Apache-2.0
// The push over prometheus-cpp: samples into a registry, serialised or pushed to a Pushgateway.
#include "kuberdma/validator/push.h"

#include <prometheus/gateway.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <memory>

namespace kuberdma::validator {

namespace {

std::shared_ptr<prometheus::Registry> Build(const std::vector<Sample>& samples) {
  auto reg = std::make_shared<prometheus::Registry>();
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> families;
  for (const auto& s : samples) {
    auto& f = families[s.name];
    if (f == nullptr) f = &prometheus::BuildGauge().Name(s.name).Help(s.help).Register(*reg);
    f->Add(s.labels).Set(s.value);
  }
  return reg;
}

}  // namespace

std::string RenderSamples(const std::vector<Sample>& samples) {
  return prometheus::TextSerializer().Serialize(Build(samples)->Collect());
}

Result<void> PushSamples(const std::vector<Sample>& samples, const std::string& url) {
  // prometheus::Gateway takes the scheme and host apart from the port.
  auto scheme = url.find("://");
  auto colon = url.find_last_of(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
    return Fail(ErrorCode::kInvalidArgument, "--push-gateway " + url + " is not http://host:port");
  }
  std::string port = url.substr(colon + 1);
  while (!port.empty() && port.back() == '/') port.pop_back();
  auto reg = Build(samples);
  try {
    prometheus::Gateway gw(url.substr(0, colon), port, kPushJob);
    gw.RegisterCollectable(reg);
    int status = gw.Push();
    if (status < 200 || status >= 300) {
      return Fail(ErrorCode::kIo,
                  "push to " + url + " answered " +
                      (status <= 0 ? "nothing (unreachable?)" : "HTTP " + std::to_string(status)));
    }
  } catch (const std::exception& e) {
    return Fail(ErrorCode::kIo, "push to " + url + ": " + e.what());
  }
  return {};
}

}  // namespace kuberdma::validator
