# Arbiter top-level Makefile: a thin wrapper over CMake.
#   make        build build/arbiter
#   make test   build and run every test (CTest)
#   make asan   run the tests under ASan+UBSan (build-asan/)
#   make tsan   run the threaded tests under ThreadSanitizer (build-tsan/)
#   make bench  run the benchmarks, JSON on stdout
#   make bench-lb  arbiter lb vs HAProxy and NGINX (wrk), JSON on stdout
#   make bench-infer  LLM routing: every lb policy vs HAProxy on emulated replicas, JSON on stdout
#   make bench-api durable submissions/s, arbiter vs Slurm (slurm-wlm), JSON on stdout
#   make bench-e2e trivial jobs end to end, arbiter vs Slurm (10 slurmd, GPU GRES), JSON on stdout
#   make bench-conns  the controller with 10,000 keep-alive agents (and a slowloris), JSON
#   make bench-ui  the web console's first paint at 1,000 nodes in chromium, JSON on stdout
#   make demo   the main job: the seed's case study, on paper and as a live cluster
#   make demo-hybrid  a service beside training: autoscaling, preemption, a timeline
#   make demo-compat  a published PyTorchJob manifest and sbatch script, run as-is
#   make fuzz   run the libFuzzer targets for a bounded time (clang)
#   make check-format  fail if any tracked C file differs from .clang-format
#   make soak   the deterministic simulation test for SOAK_SECONDS (default 1800) of seeds
#   make lint   the habits as checks: monotonic timed waits, a pure src/core
#   make cppcheck  static analysis over the tree
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# ctest's slots for make test and make asan: two to a core, as the shell
# tests mostly wait; a test that computes takes two (PROCESSORS 2;
# tests/CMakeLists.txt says why). The TSan pass keeps one to a core
# (scripts/tsan.sh: not measured at two yet)
CTEST_JOBS ?= $(shell echo $$(($(JOBS) * 2)))
BUILD ?= build
FUZZ_SECONDS ?= 20
SOAK_SECONDS ?= 1800

.PHONY: all deps build test asan reference bench bench-lb bench-infer bench-api bench-e2e bench-ui bench-conns demo demo-hybrid fuzz format check-format lint cppcheck tsan quiet-build clean

all: build

deps:
	@sh scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# the same build without its noise, for the demos and benchmarks (their
# output is a story or JSON lines): the compiler's output goes to
# $(BUILD)/build.log and is shown only when the build fails
quiet-build: deps
	@mkdir -p $(BUILD)
	@echo "building (log: $(BUILD)/build.log) ..." >&2
	@{ cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build $(BUILD) -j $(JOBS); } \
		>$(BUILD)/build.log 2>&1 || { tail -n 60 $(BUILD)/build.log >&2; exit 1; }

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS)

asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG='-g -O1' -DASAN=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && CL_WAIT_SCALE=3 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(CTEST_JOBS)

# the threaded tests under ThreadSanitizer (build-tsan/; scripts/tsan.sh)
tsan: deps
	@sh scripts/tsan.sh

bench: quiet-build
	@sh bench/run.sh $(BUILD)/arbiter

# arbiter lb vs HAProxy 2.6 and NGINX (installs haproxy, nginx, wrk as root); JSON lines.
bench-lb: quiet-build
	@sh bench/lb.sh $(BUILD)/arbiter $(BUILD)/tests/arb_lbtest

# LLM request routing on emulated replicas: every arbiter lb policy vs HAProxy (installs haproxy as root).
bench-infer: quiet-build
	@sh bench/infer.sh $(BUILD)/arbiter

# arbiter bench api vs sbatch into a local slurmctld (installs slurm-wlm and munge as root).
bench-api: quiet-build
	@sh bench/api.sh $(BUILD)/arbiter

# arbiter bench e2e vs sbatch --gres=gpu:1 --wrap true on 10 local slurmd (installs slurm-wlm and
# munge as root); E2E_JOBS (5000) jobs, E2E_RUNS (1) alternating runs of each side and their medians.
# Not in `make bench`: like bench-api it installs packages, and Slurm's side alone takes minutes.
E2E_JOBS ?= 5000
E2E_RUNS ?= 1
bench-e2e: quiet-build
	@sh bench/e2e.sh $(BUILD)/arbiter $(E2E_JOBS) $(E2E_RUNS)

# the console (/ui/) at 1,000 emulated nodes: first paint in Debian's chromium, 5 runs; JSON line.
bench-ui: quiet-build
	@sh bench/ui.sh $(BUILD)/arbiter $(CURDIR) 5

# the controller serving 10,000 keep-alive agent connections, then again beside a slowloris
bench-conns: quiet-build
	@sh bench/conns.sh $(BUILD)/arbiter $(BUILD)/tests/arb_hostile 10000 40
	@SLOWLORIS=1 sh bench/conns.sh $(BUILD)/arbiter $(BUILD)/tests/arb_hostile 10000 40

demo: quiet-build
	@sh examples/demo.sh $(BUILD)/arbiter

demo-hybrid: quiet-build
	@sh examples/demo-hybrid.sh $(BUILD)/arbiter $(BUILD)/tests/arb_lbtest

fuzz:
	@ARB_FUZZ=1 sh scripts/deps.sh
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@sh fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

# docs/reference.md from the schema tables (tests/cli/reference.sh checks it)
reference: build
	@sh scripts/reference.sh $(BUILD)/arbiter > docs/reference.md

# the habits STYLE.md asks for, as checks (scripts/lint.sh)
lint:
	@sh scripts/lint.sh

# static analysis (cppcheck; scripts/cppcheck.sh)
cppcheck: deps
	@sh scripts/cppcheck.sh && echo "cppcheck: ok"

# the formatting gate CI runs: every tracked C file as .clang-format says
check-format: deps
	@clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h') && echo "check-format: ok"

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

.PHONY: demo-ha
# several controllers over a real 3-member etcd cluster; kill -9 of the leader, live.
demo-ha: quiet-build
	@sh examples/demo-ha.sh $(BUILD)/arbiter

.PHONY: bench-ha
# durable submits/s through the leader over a 3-member etcd cluster, and SQLite, then the failover time after kill -9 of the leader; JSON lines.
bench-ha: quiet-build
	@sh bench/ha.sh $(BUILD)/arbiter $(CURDIR)

.PHONY: demo-compat
# a published PyTorchJob manifest and Slurm job-array script, submitted as-is to a live cluster
demo-compat: quiet-build
	@sh examples/demo-compat.sh $(BUILD)/arbiter

.PHONY: soak
# the controller's deterministic simulation test (tests/dst) over fresh seeds
# for SOAK_SECONDS; every failing seed is shrunk and written to build/soak_fail.txt.SEED
soak: build
	@$(BUILD)/tests/arb_dst --seeds 100000 --budget-s $(SOAK_SECONDS) -k --out $(BUILD)/soak_fail.txt
