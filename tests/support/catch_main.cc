// SPDX-License-Identifier: Apache-2.0
// Catch2's main for the unit tests. The plugin logs through spdlog; tests keep it on stderr and
// quiet unless KUBERDMA_TEST_LOG names a level ("debug").
#define CATCH_CONFIG_RUNNER
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <cstdlib>

int main(int argc, char** argv) {
  auto logger =
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::stderr_sink_st>());
  const char* level = std::getenv("KUBERDMA_TEST_LOG");
  logger->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::off);
  spdlog::set_default_logger(logger);
  return Catch::Session().run(argc, argv);
}
