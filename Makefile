# SPDX-License-Identifier: Apache-2.0
# Entry points. Every target installs the Debian packages it needs first (.ci/install-deps.sh),
# so `make demo` and `make test` work on a fresh Debian 12 machine. Builds use the `ci` preset
# (-Werror) in build/ci; developers can use any CMake preset directly.
PRESET ?= ci
BUILD := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps helm promtool configure build test unit netns demo bench fuzz boundaries format lint fixtures clean

deps:
	@bash .ci/install-deps.sh

# Helm renders the chart in the deploy checks; it is not in Debian 12 (.ci/install-helm.sh).
helm:
	@bash .ci/install-helm.sh

# promtool tests the alerts in the deploy checks (.ci/install-promtool.sh: from Debian's package).
promtool:
	@bash .ci/install-promtool.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# Source boundaries (.ci/check-boundaries.sh) and the CMake target graph's (.ci/check-targets.py).
boundaries: configure
	@bash .ci/check-boundaries.sh
	@python3 .ci/check-targets.py $(BUILD)

# All test tiers: unit, fuzz replay, and (as root) the real-namespace tests; the source boundaries
# and clang-format first.
test: build boundaries format helm promtool
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit: build
	@$(BUILD)/tests/unit_tests

netns: build
	@$(BUILD)/tests/netns_tests

# The node-in-a-box demo (needs root: it creates network namespaces and veths).
demo: build
	@$(BUILD)/tools/demo/kuberdma-demo

# Benchmarks print ratios against a named peer measured in the same run.
bench: build
	@$(BUILD)/bench/cni_bench --iterations $(or $(ITERATIONS),60)
	@echo
	@$(BUILD)/bench/deviceplugin_bench

# Open-ended fuzzing of the CNI config parser with clang's libFuzzer (FUZZ_SECONDS, default 60).
fuzz: deps
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 2; }
	@mkdir -p build/fuzz
	@clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DFMT_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL \
	  -Icni/include -Inetlink/include tests/fuzz/config_fuzz.cc cni/src/config.cc cni/src/types.cc \
	  netlink/src/sysfs/hca.cc netlink/src/sysfs/sysfs.cc netlink/src/base/*.cc -o build/fuzz/config_fuzz
	@cp -r tests/fuzz/corpus build/fuzz/corpus-run 2>/dev/null || true
	@build/fuzz/config_fuzz -max_total_time=$(or $(FUZZ_SECONDS),60) build/fuzz/corpus-run

format:
	@bash .ci/install-deps.sh format
	@git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror

# clang-tidy over every production source (.clang-tidy: warnings are errors, functions <= 40
# lines); tests are held to the compiler's warnings only.
lint: configure
	@bash .ci/install-deps.sh lint
	@git ls-files 'netlink/*.cc' 'cni/*.cc' 'deviceplugin/*.cc' 'tools/*.cc' \
	  | xargs -P $(JOBS) -n 4 clang-tidy -p $(BUILD) --quiet

# Regenerates the committed sysfs fixture trees from their model.
fixtures:
	@python3 tests/fixtures/sysfs/make_fixtures.py
	@python3 tests/fixtures/netlink/make_dcb.py

clean:
	@rm -rf build
