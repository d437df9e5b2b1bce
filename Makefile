# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (scripts/install-deps), then configure and build with CMake presets (build/<preset>/).

PRESET ?= release
JOBS ?= $(shell nproc)
BUILD_DIR := build/$(PRESET)

# ccache keys on paths relative to the checkout, so clones in other folders share the cache.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all deps configure build test test-asan fuzz demo demo-smoke format tidy clean

all: build

deps:
	@scripts/install-deps

$(BUILD_DIR)/build.ninja: | deps
	cmake --preset $(PRESET)

configure: deps
	cmake --preset $(PRESET)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build --preset $(PRESET) -j $(JOBS)

# The whole suite through ctest: labels unit, emulated, integration, e2e.
test: build
	ctest --preset $(PRESET) -j $(JOBS)

# The sanitizer build, for the unit and emulated tests.
test-asan:
	$(MAKE) test PRESET=asan

# libFuzzer targets (clang, ASan+UBSan; docs/SECURITY.md): builds only the fuzz targets and
# their libraries in build/fuzz, then runs each for FUZZ_SECONDS on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/). Fails on any crash, leak or sanitizer report.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := policy_yaml selectors agent_message

fuzz: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@scripts/run-fuzz build/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The whole system on this machine, no adapters needed: server, three emulated hosts' agents,
# Prometheus via HTTP SD, a policy change and an experiment; runs until Ctrl-C.
demo: build
	@scripts/demo $(BUILD_DIR)

# The same tour without waiting, with assertions (also ctest e2e_demo_smoke in `make test`).
demo-smoke: build
	@scripts/demo --smoke $(BUILD_DIR)

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

tidy: $(BUILD_DIR)/build.ninja
	@git ls-files '*.cc' | grep -v '^tests/' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	rm -rf build
