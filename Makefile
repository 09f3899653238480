# ortserve — the two commands a fresh Debian 12 machine needs:
#   make run    install what is missing, build, serve the demo models on :8000
#   make test   install what is missing, build, run every test
SHELL := /bin/bash
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
VENV := .venv
PY := $(VENV)/bin/python
HTTP_PORT ?= 8000
# A copy of Triton's example repository (optional): the tests serve it beside
# the generated one; absolute, since ctest runs in the build directory.
ifdef TRITON_EXAMPLES_DIR
override TRITON_EXAMPLES_DIR := $(abspath $(TRITON_EXAMPLES_DIR))
export TRITON_EXAMPLES_DIR
endif

.PHONY: all deps build run test unit-test integration-test tsan thread-safety clean demo-models

all: build

deps:
	@scripts/setup.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/ortserve --model-repository models --http-port $(HTTP_PORT)

unit-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

integration-test: build
	ORTSERVE_BIN=$(BUILD_DIR)/ortserve $(VENV)/bin/pytest tests/integration -q

# Unit tests, then integration tests; one summary line at the end. The
# deployment tests (tests/integration/test_deploy.py, test_scaleout.py) need
# the tools `deploy-deps` installs; run_tests.sh makes them required.
test: build deploy-deps
	@scripts/run_tests.sh $(BUILD_DIR)

# HAProxy, Helm (built from the Go module proxy) and the offline manifest
# checkers (kubernetes-validate, checkov) under .cache/deploy-tools.
.PHONY: deploy-deps deploy-check bench-scaleout bench-replicas bench-deps
deploy-deps:
	@scripts/setup.sh deploy

# nginx (Debian's nginx-light), the tiny model's static-answer contender in `make bench`.
bench-deps:
	@scripts/setup.sh bench

# Offline checks of deploy/: helm lint + template over deploy/helm/ci/*.yaml,
# schemas, checkov (docs/deploy.md, "Checks"). Also run by `make test`.
deploy-check: deploy-deps
	$${DEPLOY_TOOLS:-.cache/deploy-tools}/venv/bin/python scripts/check_deploy.py

# Rolling restart, SIGKILL and 1-3 replicas behind HAProxy; writes
# bench/results/RESULTS-scaleout.md and scaleout.json. SCALEOUT_ARGS="--quick".
bench-scaleout: build deploy-deps
	$(PY) bench/scaleout.py --ortserve-bin $(BUILD_DIR)/ortserve $(SCALEOUT_ARGS)

# Routing by model name (the chart's routing.mode=model-hash) on localhost:
# 300 models over 3 on-demand replicas, each with a memory budget fitting a
# third of them, behind the chart's HAProxy, one replica
# stopped mid-run; prints models per replica, spills and retries
# (tests/integration/test_replicas.py, the `scale` test).
bench-replicas: build deploy-deps
	ORTSERVE_BIN=$(BUILD_DIR)/ortserve $(VENV)/bin/pytest tests/integration/test_replicas.py -m scale -q -s

# The scheduler's tests, and the served model's over it, under
# ThreadSanitizer (the batcher's worker/leader hand-offs are where races
# would hide).
SCHED_TESTS = $(basename $(notdir $(wildcard tests/unit/scheduler_*_test.cpp))) serving_served_model_test pipeline_ensemble_scheduler_test
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DORTSERVE_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target $(SCHED_TESTS)
	set -e; for t in $(SCHED_TESTS); do TSAN_OPTIONS="halt_on_error=1 suppressions=tests/unit/tsan.supp" build-tsan/$$t --gtest_brief=1; done

# clang's thread-safety analysis over the annotated locks of the scheduler
# and repository (core/Mutex.h), as errors, in build-tsa/. CI runs it.
thread-safety: deps
	scripts/setup.sh fuzz
	JOBS=$(JOBS) scripts/check_thread_safety.sh

# Unit + integration tests under ASan+UBSan (build-asan/, leaks included),
# then the fuzz smoke (run_fuzz.sh) for FUZZ_SECONDS (default 10) per target;
# prints the wall time of each stage. Not part of `make test`; CI (.ci/run)
# runs it after `make test` (tests/fuzz/README.md, "Sanitizers").
.PHONY: test-sanitize
test-sanitize: deps
	scripts/setup.sh fuzz
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),10) JOBS=$(JOBS) scripts/test_sanitize.sh

# GPU provider libraries (CUDA 13 / TensorRT 10) into third_party/onnxruntime-gpu;
# then: ONNXRUNTIME_ROOT=third_party/onnxruntime-gpu make build BUILD_DIR=build-gpu
# (docs/gpu.md). Never part of `make test`.
.PHONY: gpu-deps gpu-wheels gpu-bundle gpu-bundle-check
gpu-deps:
	@scripts/setup.sh gpu

# The CUDA 13 / cuDNN 9 wheels of the GPU host (about 1.8 GB) into
# .cache/gpu-wheels, for gpu-bundle-check.
gpu-wheels:
	@scripts/setup.sh gpu-wheels

# The portable GPU bundle for an air-gapped GPU host: $(BUILD_DIR)/gpu-bundle/
# transfer-N/ folders of xz parts (at most GPU_BUNDLE_PART_MIB each), with
# MANIFEST.json and reassemble.py (docs/gpu.md, "The portable GPU bundle").
GPU_BUNDLE_PART_MIB ?= 48
gpu-bundle: build gpu-deps
	cmake --build $(BUILD_DIR) -j $(JOBS) --target ortserve_gpu_bundle_programs
	$(PY) scripts/gpu_bundle.py --build-dir $(BUILD_DIR) --part-mib $(GPU_BUNDLE_PART_MIB)

# The bundle rehearsed without a GPU: parts, a clean environment, the CUDA
# libraries resolved from the wheels, "no CUDA device", the on-GPU checks on
# CPU instances. Its own target, not part of `make test` (docs/gpu.md says why).
gpu-bundle-check: gpu-bundle gpu-wheels
	$(PY) scripts/gpu_bundle_check.py --bundle $(BUILD_DIR)/gpu-bundle

demo-models: deps
	$(PY) scripts/make_demo_models.py models

clean:
	rm -rf $(BUILD_DIR) build-tsan build-asan build-tsa

# Benchmark: ortserve vs FastAPI+onnxruntime vs in-process ORT on the bench
# models; writes bench/RESULTS.md and bench/results/. Not a test: nothing is
# asserted. BENCH_ARGS="--quick" for a smoke run, "--models tiny,mlp" etc.
.PHONY: bench
bench: build bench-deps
	$(PY) bench/lib/make_bench_models.py
	$(PY) bench/run_bench.py --ortserve-bin $(BUILD_DIR)/ortserve $(BENCH_ARGS)

# Overload and soak: open-loop Poisson load at 3x the measured capacity for
# 180 s, two priority levels; writes bench/SOAK.md and bench/results/soak.*.
# Fails on a crash, an answer other than 200 or a 503 naming its limit, a
# wrong output or metrics that disagree with the client; timing is only
# measured. SOAK_ARGS="--duration 30" for a short run.
.PHONY: soak
soak: build
	$(PY) bench/soak.py --ortserve-bin $(BUILD_DIR)/ortserve $(SOAK_ARGS)

# Stateful streams: Silero VAD sequences batched by the oldest strategy vs
# one sequence per execution vs onnxruntime in process; writes
# bench/results/RESULTS-sequences.md. Not a test either.
.PHONY: bench-sequences
bench-sequences: build
	$(PY) bench/sequence_bench.py --ortserve-bin $(BUILD_DIR)/ortserve $(SEQ_BENCH_ARGS)

# The response cache under a repeating request mix: uncached vs all hits vs
# all misses on the bench's cnn (perf_analyzer); writes
# bench/results/RESULTS-response-cache.md. CACHE_BENCH_ARGS="--distinct 32".
.PHONY: bench-cache
bench-cache: build
	$(PY) bench/cache_bench.py --ortserve-bin $(BUILD_DIR)/ortserve $(CACHE_BENCH_ARGS)

# The text pre/post-processing pipeline: three ortserve models called by the
# client vs the ensemble vs FastAPI with Python pre/post; writes
# bench/results/RESULTS-pipeline.md. 5 rounds, the legs' order flipping each
# round: medians and the ensemble/FastAPI ratio of each round's pair.
PIPELINE_BENCH_ARGS ?= --rounds 5
.PHONY: bench-pipeline
bench-pipeline: build
	$(PY) bench/pipeline_bench.py --ortserve-bin $(BUILD_DIR)/ortserve $(PIPELINE_BENCH_ARGS)

# INT8 (onnxruntime's quantize_dynamic) against FP32 on the BERT-shaped
# encoder, through ortserve and in process; writes
# bench/results/RESULTS-int8.md. INT8_BENCH_ARGS="--rounds 1".
.PHONY: bench-int8
bench-int8: build
	$(PY) bench/int8_bench.py --ortserve-bin $(BUILD_DIR)/ortserve $(INT8_BENCH_ARGS)

# Many models per node (bench/many_models.py): on demand, then under a memory
# budget that fits 20 of 200 models (Zipf mix at concurrency 16, outputs and
# metrics checked, VmRSS against the budget), then 1,000 load/evict cycles
# (VmRSS before and after), then cold starts of 20 models at widths 64, 512
# and 2048 (33 KiB to 32 MiB a model). MANY_MODELS_ARGS are added to each run.
.PHONY: bench-many-models
bench-many-models: build
	$(PY) bench/many_models.py --ortserve-bin $(BUILD_DIR)/ortserve --models 200 --on-demand $(MANY_MODELS_ARGS)
	$(PY) bench/many_models.py --ortserve-bin $(BUILD_DIR)/ortserve --models 200 --budget-fits 20 \
	  --requests 4000 --concurrency 16 $(MANY_MODELS_ARGS)
	$(PY) bench/many_models.py --ortserve-bin $(BUILD_DIR)/ortserve --cycles 1000 $(MANY_MODELS_ARGS)
	@for width in 64 512 2048; do \
	  $(PY) bench/many_models.py --ortserve-bin $(BUILD_DIR)/ortserve --on-demand --models 20 --requests 200 \
	    --width $$width $(MANY_MODELS_ARGS) || exit 1; \
	done

# System shared memory against the same 1 MiB load over the wire (perf_analyzer).
.PHONY: bench-shm
bench-shm: build
	$(PY) bench/shm_bench.py --binary $(BUILD_DIR)/ortserve $(SHM_BENCH_ARGS)

# Per-client quotas, over HTTP and gRPC: a client within its quota, alone and
# while another overloads the server (wrk; bench/lib/grpc_greedy.py); its p99
# ratio (issue 37's 1.5x) and the other's accepted rate against its configured
# rate (within 10%) into bench/results/RESULTS-quotas.md.
# QUOTA_BENCH_ARGS="--seconds 8 --rounds 3 --protocol http,grpc"; add
# "--server-cpus 0 --client-cpus 1" to pin the server and both clients to CPUs
# of their own, "--compare /tmp/ortserve-main" to measure another build in the
# same rounds.
.PHONY: bench-quotas
bench-quotas: build
	$(PY) bench/quota_latency.py --binary $(BUILD_DIR)/ortserve $(QUOTA_BENCH_ARGS)

# Hostile clients: every bench/hostile_*.py (HTTP and metrics; gRPC), each
# writing its section of bench/results/RESULTS-hostile.md. ORTSERVE_BEFORE=<a
# build of main> measures that build too, for before/after tables:
#   ORTSERVE_BEFORE=/tmp/ortserve-before make bench-hostile
.PHONY: bench-hostile
bench-hostile: build
	@for script in bench/hostile_*.py; do \
	  echo "== $$script"; \
	  $(PY) $$script --binary $(BUILD_DIR)/ortserve $(if $(ORTSERVE_BEFORE),--before $(ORTSERVE_BEFORE)) \
	    $(HOSTILE_BENCH_ARGS) || exit 1; \
	done

# libFuzzer (clang, ASan+UBSan) on every tests/fuzz target, FUZZ_SECONDS each
# (default 60), built in build-fuzz/; FUZZ_TARGETS="http_infer_request ..." for
# a subset. Not part of `make test`, which replays the seed corpora instead
# (ctest fuzz_*_corpus). tests/fuzz/README.md.
.PHONY: fuzz
fuzz: deps
	scripts/setup.sh fuzz
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) FUZZ_TARGETS="$(FUZZ_TARGETS)" JOBS=$(JOBS) tests/fuzz/run_fuzz.sh
