# SPDX-License-Identifier: Apache-2.0
# Entry points. Every target installs the Debian packages it needs first (.ci/install-deps.sh),
# so `make demo` and `make test` work on a fresh Debian 12 machine. Builds use the `ci` preset
# (-Werror) in build/ci; developers can use any CMake preset directly.
PRESET ?= ci
BUILD := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps helm promtool configure build test asan images push chart vmtest unit netns demo bench fuzz boundaries format lint fixtures clean

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
	@$(MAKE) --no-print-directory asan
	@BUILD=$(BUILD) bash deploy/images/build.sh; rc=$$?; \
	  if [ $$rc -eq 0 ]; then bash tests/images/registry_test.sh; elif [ $$rc -ne 77 ]; then exit $$rc; fi
	@$(MAKE) --no-print-directory vmtest

# The sanitizer tier (run by `make test`): the unit, namespace and fuzz-replay tests built with
# AddressSanitizer + UBSan (the `asan` preset, build/asan); any report fails the test.
ASAN_TARGETS := unit_tests netns_tests kube-rdma fuzz_config fuzz_ipam fuzz_nccl_log fuzz_checkpoint \
  fuzz_state fuzz_podenv fuzz_dpconfig fuzz_fabric
asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS) --target $(ASAN_TARGETS)
	@cd build/asan && ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -R '^(unit|netns|fuzz):'

# The node image from this build's binaries (deploy/images/build.sh; run by `make test`): a root of
# Debian packages (mkroot.sh), buildah, smoke-tested, the validator's copy run in a plain Debian
# root; an OCI archive in build/images with its size and digest. Needs root. Refused (exit 77) for a
# build without CUDA and NCCL, whose validator could only take inventory: `make test` then skips it.
images: build
	@BUILD=$(BUILD) bash deploy/images/build.sh

# The node image pushed to a registry you own (REGISTRY=registry.example.com/kube-rdma; skopeo's
# credentials: `skopeo login` first), tagged with the version; writes build/images/image-values.yaml
# for `helm install -f` (deploy/images/push.sh). Builds the image first where needed.
push: build
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=registry.example.com/kube-rdma"; exit 2; }
	@BUILD=$(BUILD) bash deploy/images/push.sh $(REGISTRY) $(PUSH_FLAGS)

# The Helm chart as a versioned artifact with its SHA-256 (build/chart; checked by CTest too).
chart: helm
	@bash deploy/package_chart.sh build/chart

# The VM tier (tests/vm/run.sh; run by `make test`): Debian 12's own kernel under QEMU (TCG) with
# Soft-RoCE, two guests (shared and exclusive netns mode) running the VM-only tests on real RDMA
# devices. Skipped, saying so, only where QEMU is not installed.
vmtest: build
	@bash tests/vm/run.sh $(BUILD); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]

unit: build
	@$(BUILD)/tests/unit_tests

netns: build
	@$(BUILD)/tests/netns_tests

# The node-in-a-box demo (needs root: it creates network namespaces and veths), on the objects
# the chart renders (deploy/render.sh): FABRIC=roce (default) ci/demo-values.yaml on the roce8
# fixture, FABRIC=ib ci/demo-ib-values.yaml on ib8; DEMO_VALUES picks another rendering in
# $(BUILD)/rendered (e.g. roce-values).
FABRIC ?= roce
DEMO_FIXTURE := tests/fixtures/sysfs/$(if $(filter ib,$(FABRIC)),ib8,roce8)
# DRA=1: the pods get their GPU+NIC pairs through DRA (ci/demo-dra-values.yaml; docs/dra.md).
DEMO_VALUES ?= $(if $(DRA),demo-dra-values,$(if $(filter ib,$(FABRIC)),demo-ib-values,demo-values))
# FABRIC=roce (the default) then runs a second node in shared mode (ci/demo-shared-values.yaml:
# the trainer's two pods each get a macvlan child of the same four HCAs), and a two-node cluster
# (ci/demo-cluster-values.yaml: a leaf bridge per rail, routed rails, one pod per node).
# It installs only what it needs (`install-deps.sh demo`: no test tiers' packages) and builds only
# the demo and the four binaries it runs.
# SRIOV=1: a node whose PF carries SR-IOV VFs, for real: the VM tier's igb guest (QEMU 8+, from
# bookworm-backports on Debian 12), three pods on VFs of one PF, isolated, all restored
# (tools/demo/sriov-demo.sh).
ifeq ($(SRIOV),1)
demo:
	@bash .ci/install-deps.sh demo-sriov
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target kube-rdma
	@bash tools/demo/sriov-demo.sh $(BUILD)
else
demo: helm
	@bash .ci/install-deps.sh demo
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target kuberdma-demo
	@bash deploy/render.sh $(BUILD)/rendered >/dev/null
	@$(BUILD)/tools/demo/kuberdma-demo --fixture $(DEMO_FIXTURE) --manifests $(BUILD)/rendered/$(DEMO_VALUES).yaml $(if $(DRA),--dra)
	@if [ "$(FABRIC)" = roce ] && [ "$(DEMO_VALUES)" = demo-values ]; then \
	  echo; echo "=== Node 2: the same rails in shared mode (many pods per HCA) ==="; \
	  $(BUILD)/tools/demo/kuberdma-demo --fixture $(DEMO_FIXTURE) --manifests $(BUILD)/rendered/demo-shared-values.yaml && \
	  echo && echo "=== A cluster: two nodes, a leaf switch per rail, routed rails ===" && \
	  $(BUILD)/tools/demo/kuberdma-demo --cluster 2 --fixture $(DEMO_FIXTURE) --manifests $(BUILD)/rendered/demo-cluster-values.yaml; fi
endif

# Benchmarks print ratios against a named peer measured in the same run.
bench: build
	@$(BUILD)/bench/cni_bench --iterations $(or $(ITERATIONS),60)
	@echo
	@$(BUILD)/bench/deviceplugin_bench
	@echo
	@$(BUILD)/bench/acceptance_bench
	@echo
	@$(BUILD)/bench/deviceplugin_dra_bench
	@$(BUILD)/bench/cabling_bench
	@echo
	@bash bench/vf_bench.sh $(BUILD)

# Open-ended fuzzing of one parser with clang's libFuzzer (FUZZ_TARGET: config, ipam, nccl_log,
# checkpoint, state, podenv, dpconfig, fabric; FUZZ_SECONDS, default 60): the `fuzz` preset (build/fuzz)
# builds the same targets with libFuzzer's main, ASan and UBSan, and starts from the corpus.
FUZZ_TARGET ?= config
fuzz: deps
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 2; }
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS) --target fuzz_$(FUZZ_TARGET)
	@rm -rf build/fuzz/corpus-$(FUZZ_TARGET) && cp -r tests/fuzz/corpus/$(FUZZ_TARGET) build/fuzz/corpus-$(FUZZ_TARGET)
	@build/fuzz/tests/fuzz_$(FUZZ_TARGET) -max_total_time=$(or $(FUZZ_SECONDS),60) build/fuzz/corpus-$(FUZZ_TARGET)

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
