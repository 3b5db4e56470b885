# LMPool build and test entry points. `make test` and `make serve` do all set-up on a fresh
# machine with node, npm and gcc.
BUN      := node_modules/.bin/bun
DENO     := node_modules/.bin/deno
BUILD    := build
CC       ?= gcc
CFLAGS   := -std=c11 -O3 -march=x86-64-v2 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -fopenmp
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(CUDA_HOME)/bin/nvcc
NVFLAGS  := -O3 -std=c++17 -arch=sm_90a -Xcompiler -fPIC -Xcompiler -fvisibility=hidden --expt-relaxed-constexpr -lineinfo
# NCCL lives inside python's nvidia packages on the GPU machine (see .gpu/env.sh). Its headers
# are needed at build time only: the library dlopens libnccl.so.2 at run time (csrc/cuda/nccl_api.cu),
# so it still loads where NCCL is missing and only the NCCL transfer calls report it.
NCCL_HOME ?=
NCCL_INC := $(if $(NCCL_HOME),-I$(NCCL_HOME)/include -DLP_HAVE_NCCL,)
NCCL_LIB := -ldl

COMMON_SRC := $(wildcard csrc/common/*.c)
CPU_SRC    := $(wildcard csrc/cpu/*.c)
CUDA_SRC   := $(wildcard csrc/cuda/*.cu)
HEADERS    := $(wildcard csrc/include/*.h csrc/common/*.h csrc/cpu/*.h csrc/cuda/*.h csrc/cuda/*.cuh)
CPU_LIB    := $(BUILD)/liblmpool_cpu.so
CUDA_LIB   := $(BUILD)/liblmpool_cuda.so
HAVE_CUDA  := $(shell test -x $(NVCC) && test -f $(CUDA_HOME)/include/cublas_v2.h && echo 1)

.PHONY: all native native-cpu native-cuda deps system-deps test test-unit check fmt serve bench clean

all: native

deps: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# Optional system libraries (Debian/Ubuntu): libzmq for KV events (--kv-events-config) and the strict
# Python consumer of their tests. Without them those tests skip and say why; .ci/run installs them
# and runs with CI=true, under which such a skip fails.
SYSTEM_DEPS := libzmq5 python3-zmq python3-msgpack
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
system-deps:
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(SYSTEM_DEPS) || \
		{ $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(SYSTEM_DEPS); }

# Always the CPU library; the CUDA one too where nvcc and cuBLAS are found.
native: native-cpu $(if $(HAVE_CUDA),native-cuda,)
native-cpu: $(CPU_LIB)
native-cuda:
	@$(MAKE) --no-print-directory -j$(shell nproc) $(CUDA_LIB)

$(CPU_LIB): $(COMMON_SRC) $(CPU_SRC) $(HEADERS)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -shared -o $@ $(COMMON_SRC) $(CPU_SRC) -lm

# One object per source so the CUDA build compiles in parallel (one serial nvcc call takes minutes).
CUDA_OBJ_DIR := $(BUILD)/cuda-obj
CUDA_OBJ := $(patsubst csrc/%,$(CUDA_OBJ_DIR)/%.o,$(COMMON_SRC) $(CUDA_SRC))

$(CUDA_OBJ_DIR)/%.cu.o: csrc/%.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $(NCCL_INC) -c -o $@ $<

$(CUDA_OBJ_DIR)/%.c.o: csrc/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O3 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -c -o $@ $<

# Only the lp_* functions lmpool.h marks LP_API leave the library (see csrc/cuda/exports.map).
CUDA_EXPORTS := csrc/cuda/exports.map

$(CUDA_LIB): $(CUDA_OBJ) $(CUDA_EXPORTS)
	$(NVCC) $(NVFLAGS) -shared -o $@ $(CUDA_OBJ) -L$(CUDA_HOME)/lib64 -lcublas -lcublasLt $(NCCL_LIB) \
		-Xlinker --version-script=$(CUDA_EXPORTS)

test: deps native-cpu
	$(BUN) test --timeout 120000
	$(DENO) check mod.ts ffi/mod.ts lib/model/mod.ts lib/global/mod.ts lib/transfer/mod.ts
	$(DENO) test --allow-ffi --allow-env --allow-read --allow-sys test/deno/

# Types (tsc and Deno), formatting and lint; the last two read their settings from deno.json.
check: deps
	node_modules/.bin/tsc --noEmit -p .
	$(DENO) check mod.ts ffi/mod.ts lib/model/mod.ts lib/global/mod.ts lib/transfer/mod.ts
	$(DENO) fmt --check
	$(DENO) lint

# Formats the tree in place (what `make check` holds it to).
fmt: deps
	$(DENO) fmt

serve: deps native
	$(BUN) run examples/serve.ts $(ARGS)

bench: deps native
	$(BUN) run bench/main.ts $(ARGS)

clean:
	rm -rf $(BUILD)
