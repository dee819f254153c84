// SPDX-License-Identifier: Apache-2.0
// rdma-validate-push.so: the Pushgateway client, loaded by rdma-validate only when a push is
// asked for. A C entry point, so nothing of C++ crosses between the two.
#include <cstring>
#include <exception>

#include "kuberdma/validator/push.h"

extern "C" int kuberdma_push_samples(const char* samples_json, const char* url, char* err,
                                     size_t err_len) {
  using kuberdma::validator::Sample;
  auto fail = [&](const std::string& why) {
    std::strncpy(err, why.c_str(), err_len - 1);
    err[err_len - 1] = '\0';
    return 1;
  };
  try {
    auto doc = nlohmann::json::parse(samples_json, nullptr, false);
    if (!doc.is_array()) return fail("push: the samples are not a JSON array");
    std::vector<Sample> samples;
    for (const auto& s : doc) {
      samples.push_back({s.value("name", ""),
                         s.value("labels", std::map<std::string, std::string>{}),
                         s.value("value", 0.0), s.value("help", "")});
    }
    auto pushed = kuberdma::validator::PushSamples(samples, url);
    return pushed ? 0 : fail(pushed.error().message());
  } catch (const std::exception& e) {
    return fail(std::string("push: ") + e.what());
  }
}
