# bert.c build. `make` builds ./bert and the test binaries; `make test` runs the whole
# suite, once in the optimised build and once under AddressSanitizer + UBSan.
CC      ?= gcc
BUILD   ?= build
SANITIZE ?= 0
# Matrix-product library behind src/kernels/cpu/sgemm.h: onednn (default, faster here) or openblas.
GEMM    ?= onednn
# The instruction set of the optimised build: this machine's (default), or a portable one for
# a binary that runs elsewhere (scripts/gpu_bundle.sh: MARCH=x86-64-v3).
MARCH   ?= native

BLAS_INC := /usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIB := /usr/lib/x86_64-linux-gnu/openblas-openmp
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5-serial 2>/dev/null)
HDF5_LIBS   := $(shell pkg-config --libs hdf5-serial 2>/dev/null)
# MPI (data-parallel pre-training, src/train/comm.h): OpenMPI from Debian; a process not
# started by mpirun/srun never calls it.
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
# -fno-math-errno: nothing reads errno after a math call. Without it sqrtf may have to call
# the library to set errno, and loops with it (the optimizers) stay scalar; with it sqrtf is
# the one correctly rounded instruction, so the values are the same.
MATH    := -fno-math-errno
CFLAGS  := -std=c11 -D_GNU_SOURCE $(WARN) $(MATH) -Isrc -I$(BLAS_INC) $(HDF5_CFLAGS) $(MPI_CFLAGS) -fopenmp -MMD -MP
# OpenBLAS: the GEMM library of GEMM=openblas builds; otherwise only the sgemm peak (src/bench,
# in the program and the bench test) times it.
BLAS_LIBS := -L$(BLAS_LIB) -Wl,-rpath,$(BLAS_LIB) -lopenblas
# bert serve (src/serve/): libmicrohttpd from Debian, an HTTP/1.1 server library (docs/serving.md).
LDLIBS  := $(HDF5_LIBS) $(MPI_LIBS) -lmicrohttpd -lisal -lzip -lutf8proc -lcjson -lbz2 -lexpat -lm -fopenmp
ifeq ($(GEMM),openblas)
  CFLAGS += -DBERT_GEMM_OPENBLAS
  LDLIBS := $(BLAS_LIBS) -ldnnl $(LDLIBS)   # oneDNN still runs the bf16 products (kernels/cpu/gemm_half.h)
else ifeq ($(GEMM),onednn)
  LDLIBS := -ldnnl $(LDLIBS)
else
  $(error GEMM must be onednn or openblas, not '$(GEMM)')
endif
ifeq ($(SANITIZE),fuzz)   # libFuzzer targets (make fuzz): clang, ASan + UBSan, coverage for the fuzzer
  CFLAGS += -O1 -g -march=native -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
  LDLIBS += -fsanitize=address,undefined
else ifeq ($(SANITIZE),1)
  CFLAGS += -O1 -g -march=native -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDLIBS += -fsanitize=address,undefined
else
  CFLAGS += -O3 -march=$(MARCH) -g
endif

# libbert.a: the library (no command-line or benchmark code); libbert_cli.a: the commands
# and the sgemm peak, linked into ./bert and the tests that drive commands in-process.
LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/bench/*' | sort)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := $(filter-out src/cli/main.c,$(sort $(wildcard src/cli/*.c src/bench/*.c)))
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
CLI_TESTS := test_bench
# test_serve is an HTTP client of bert serve: libcurl (scripts/install-deps.sh's TEST_PKGS).
TEST_LIBS_test_serve := -lcurl -lpthread
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BERT     := $(if $(filter build,$(BUILD)),bert,$(BUILD)/bert)

.PHONY: all test test-fast test-matrix install fuzz fuzz-build fuzz-replay clean cuda-check cuda-check-12 cuda-build cuda-test cuda-emulate cuda-sass FORCE
# make GPU=cuda: also the CUDA backend, which ./bert loads from build-cuda/ on --device cuda
all: $(BERT) $(TEST_BIN) $(if $(filter cuda,$(GPU)),build-cuda/libbert_cuda.so)

# The compiler and flags each build folder was compiled with: a change to them (a new flag
# here, another CC) rebuilds that folder's objects and tests, as a change to a source does.
FLAGS_STAMP := $(BUILD)/compile_flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' > $@

$(BUILD)/libbert.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libbert_test.a, the library the tests link: libbert.a with the sources that include
# core/test_hooks.h compiled again with BERT_TEST_HOOKS (the work counts of the scaling tests).
HOOK_SRC := $(shell grep -l '^\#include "core/test_hooks.h"' $(LIB_SRC))
HOOK_OBJ := $(HOOK_SRC:%.c=$(BUILD)/hooks/%.o)
$(BUILD)/libbert_test.a: $(filter-out $(HOOK_SRC:%.c=$(BUILD)/%.o),$(LIB_OBJ)) $(HOOK_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libbert_cli.a: $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BERT): $(BUILD)/src/cli/main.o $(BUILD)/libbert_cli.a $(BUILD)/libbert.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(if $(filter openblas,$(GEMM)),,$(BLAS_LIBS))

# Tests link the library with its test hooks; the ones that drive commands in-process also
# the commands.
$(BUILD)/tests/%: tests/%.c tests/test.h tests/test_util.h $(BUILD)/libbert_test.a $(BUILD)/libbert_cli.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DBERT_TEST_HOOKS -Itests -o $@ $< $(if $(filter $*,$(CLI_TESTS)),$(BUILD)/libbert_cli.a) $(BUILD)/libbert_test.a \
		$(LDLIBS) $(TEST_LIBS_$*) $(if $(filter $*,$(CLI_TESTS)),$(if $(filter openblas,$(GEMM)),,$(BLAS_LIBS)))

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/hooks/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DBERT_TEST_HOOKS -c -o $@ $<

# The whole suite: optimised build, then the sanitizer build, then the model's tests once
# more with the other GEMM library (OpenBLAS), then the fuzz targets' seed corpora (replayed,
# not fuzzed), then one summary line.
test:
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory all BUILD=build-asan SANITIZE=1
	@$(MAKE) --no-print-directory BUILD=build-openblas GEMM=openblas \
		$(addprefix build-openblas/tests/,test_layers test_model test_bench)
	@$(MAKE) --no-print-directory fuzz-build
	@bash tests/run.sh build build-asan build-openblas

# Optimised build only (quick iteration).
test-fast:
	@$(MAKE) --no-print-directory all
	@bash tests/run.sh build

# The model, layer, bench and bf16 tests (tests/matrix.sh's list) of both GEMM builds under every OpenBLAS / OpenMP / oneDNN
# environment machines of this kind have (one line each); minutes, so not part of `make test`.
test-matrix:
	@$(MAKE) --no-print-directory $(addprefix build/tests/,test_layers test_model test_bench test_bf16)
	@$(MAKE) --no-print-directory BUILD=build-openblas GEMM=openblas \
		$(addprefix build-openblas/tests/,test_layers test_model test_bench test_bf16)
	@bash tests/matrix.sh

# `make install PREFIX=/opt/bert`: the program in PREFIX/bin, the bundled vocabularies and
# corpus in PREFIX/share/bert, where the installed program finds them (src/core/bundled.h);
# for C programs, the library PREFIX/lib/libbert.a, its headers under PREFIX/include/bert (as
# they are included: "model/bert.h"; not the cli, the bench or *_internal.h ones) and
# PREFIX/lib/pkgconfig/bert.pc (`cc prog.c $(pkg-config --cflags --libs bert)`).
PUBLIC_HEADERS := $(shell cd src && find . -name '*.h' -not -name '*_internal.h' -not -path './cli/*' \
                    -not -path './bench/*' | sed 's|^\./||' | sort)
VERSION := $(shell sed -n 's/^\#define BERT_VERSION "\(.*\)"/\1/p' src/core/version.h)
install: $(BERT) $(BUILD)/libbert.a
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/bert $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BERT) $(DESTDIR)$(PREFIX)/bin/bert
	cp -R data/vocab data/corpus $(DESTDIR)$(PREFIX)/share/bert/
	install -m 644 $(BUILD)/libbert.a $(DESTDIR)$(PREFIX)/lib/libbert.a
	for h in $(PUBLIC_HEADERS); do install -D -m 644 src/$$h $(DESTDIR)$(PREFIX)/include/bert/$$h || exit 1; done
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include/bert' '' \
		'Name: bert' 'Description: bert.c: BERT data preparation, pre-training, fine-tuning and inference in C' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir} -fopenmp' \
		'Libs: -L$${libdir} -lbert $(LDLIBS) $(BLAS_LIBS)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/bert.pc

# Fuzzing: every parser under libFuzzer (tests/fuzz/fuzz_*.c, seeds in tests/fuzz/corpus/<target>/).
# `make fuzz` runs each for FUZZ_SECONDS (default 30) and fails on a crash, leak or timeout;
# `make fuzz-replay` runs the seed corpora once (seconds).
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h build-fuzz/libbert.a $(FLAGS_STAMP)
	clang $(filter-out -MMD -MP,$(CFLAGS)) -Itests/fuzz -fsanitize=fuzzer -o $@ $< build-fuzz/libbert.a $(LDLIBS)
fuzz-build:
	@$(MAKE) --no-print-directory CC=clang BUILD=build-fuzz SANITIZE=fuzz \
		build-fuzz/libbert.a $(addprefix build-fuzz/,$(FUZZ_TARGETS))
fuzz: fuzz-build
	@bash tests/fuzz/run.sh fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-replay: fuzz-build
	@bash tests/fuzz/run.sh replay 0 $(FUZZ_TARGETS)

clean:
	rm -rf build build-asan build-openblas build-fuzz build-cuda build-cuda12 build-emu bert

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The CUDA backend (src/kernels/cuda/, the GPU issue), built with nvcc: the system's, or the one
# scripts/install-cuda-toolchain.sh unpacks from PyPI. `make GPU=cuda cuda-check` compiles every
# .cu file for Ampere (sm_80) and Hopper (sm_90) without a GPU; the default build and `make test`
# need no CUDA. -fmad=false: no contraction into fused multiply-adds, as the CPU build (-std=c11)
# has none, so the element-wise kernels give the CPU backend's bits.
GPU ?= none
# nvcc: the one install-cuda-toolchain.sh unpacked (CUDA 13: what it builds needs a CUDA 13
# driver, 580 or later), else the PATH's, else $CUDA_HOME's or /usr/local/cuda's (NVIDIA's
# installers leave it off the PATH); NVCC= names another (a CUDA 12 toolkit for a CUDA 12
# driver). Looked up once (:=), not at each use.
ifeq ($(origin NVCC),undefined)
NVCC := $(firstword $(wildcard .cuda-toolchain/nvidia/cu13/bin/nvcc) $(shell command -v nvcc 2>/dev/null) \
  $(if $(CUDA_HOME),$(wildcard $(CUDA_HOME)/bin/nvcc)) $(wildcard /usr/local/cuda/bin/nvcc))
endif
NVCC_FOUND = @if [ -z "$(NVCC)" ]; then echo "make GPU=cuda: no nvcc (looked in .cuda-toolchain/, on the PATH, in \
  \$$CUDA_HOME/bin and /usr/local/cuda/bin): install NVIDIA's CUDA toolkit (12 or 13), or run bash \
  scripts/install-cuda-toolchain.sh, or name it with NVCC=/path/to/nvcc" >&2; exit 1; fi
# machine code for Ampere (sm_80, which Ada's sm_86/89 run too) and Hopper, and compute_90 PTX,
# which the driver compiles at the first run for a GPU newer than both (Blackwell: sm_100, sm_120)
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90
comma := ,
# what CUDA_ARCHS compiles for, as cuda-check reports it: sm_80 sm_90 compute_90
CUDA_TARGETS = $(patsubst code=%,%,$(filter code=%,$(subst $(comma), ,$(CUDA_ARCHS))))
NVCCFLAGS := -std=c++17 -O3 -fmad=false -Isrc $(CUDA_ARCHS) -Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter -MMD -MP
CUDA_SRC := $(sort $(wildcard src/kernels/cuda/*.cu))
CUDA_OBJ := $(CUDA_SRC:%.cu=build-cuda/%.o)

cuda-check:
	$(NVCC_FOUND)
	@$(MAKE) --no-print-directory $(CUDA_OBJ)
	@echo "cuda-check: $(words $(CUDA_SRC)) CUDA files compiled for $(CUDA_TARGETS) with $(NVCC)"

# `make GPU=cuda cuda-check-12`: every .cu file compiled against CUDA 12.1's runtime and cuBLAS
# headers (the oldest CUDA 12 the backend is written for), which scripts/install-cuda-toolchain.sh
# --cuda12-headers unpacks from PyPI: an API of CUDA 13 used, or one 12.1 lacks, fails here.
# nvcc stays 13's (PyPI's CUDA 12 compiler wheels hold ptxas alone), so this checks the API, not
# CUDA 12's compiler. Objects go to build-cuda12/ and are not used.
CUDA12_HEADERS := .cuda-toolchain/cu12-headers
cuda-check-12:
	@if [ -z "$(NVCC)" ] || [ ! -f $(CUDA12_HEADERS)/include/cuda_runtime_api.h ]; then echo "cuda-check-12: run \
	  bash scripts/install-cuda-toolchain.sh --cuda12-headers" >&2; exit 1; fi
	@mkdir -p build-cuda12
	@for f in $(CUDA_SRC); do $(NVCC) $(filter-out -MMD -MP $(CUDA_ARCHS),$(NVCCFLAGS)) -I$(CUDA12_HEADERS)/include \
	  -gencode arch=compute_80,code=sm_80 -c -o build-cuda12/$$(basename $$f .cu).o $$f || exit 1; done
	@printf '#include <cuda_runtime.h>\n#include <cublasLt.h>\nstatic_assert(CUDART_VERSION == 12010 && CUBLAS_VER_MAJOR == 12, "not 12.1");\n' | \
	  $(NVCC) -std=c++17 -I$(CUDA12_HEADERS)/include -x cu -c -o /dev/null - || exit 1
	@echo "cuda-check-12: $(words $(CUDA_SRC)) CUDA files compiled against CUDA 12.1's runtime and cuBLAS headers"

# `make GPU=cuda cuda-sass`: each CUDA file's Hopper machine code (build-sass/*.sass, by
# cuobjdump) and ptxas's registers, stack and spills per kernel: what the compiler made of a
# kernel (how many loads it keeps in flight, what it reloads) can be read without a GPU.
CUOBJDUMP := $(firstword $(wildcard $(dir $(NVCC))cuobjdump) $(shell command -v cuobjdump 2>/dev/null))
cuda-sass:
	@if [ -z "$(NVCC)" ] || [ -z "$(CUOBJDUMP)" ]; then \
	  echo "cuda-sass: no nvcc or cuobjdump: run bash scripts/install-cuda-toolchain.sh" >&2; exit 1; fi
	@mkdir -p build-sass
	@for f in $(CUDA_SRC); do b=$$(basename $$f .cu); \
	  $(NVCC) $(filter-out -MMD -MP $(CUDA_ARCHS),$(NVCCFLAGS)) -gencode arch=compute_90,code=sm_90 -Xptxas -v \
	    -c -o build-sass/$$b.o $$f 2>&1 | awk -v file=$$b '/Compiling entry/ {match($$0, /function .[^ ]+/); \
	    k = substr($$0, RSTART + 10, RLENGTH - 11)} /spill stores/ {s = $$0} /Used [0-9]+ registers/ \
	    {match($$0, /Used [0-9]+ registers/); printf "%-16s %-14s %s | %s\n", file, substr($$0, RSTART + 5, RLENGTH - 15) \
	    " registers", k, s}' | sed -E 's/\| *([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads/| stack \1 B, spills: \2 B stored, \3 B loaded/'; \
	  PATH="$(dir $(CUOBJDUMP)):$$PATH" $(CUOBJDUMP) -sass build-sass/$$b.o > build-sass/$$b.sass; done
	@echo "cuda-sass: build-sass/*.sass (sm_90)"

# The CUDA backend as a shared library (the CUDA runtime linked in statically, cuBLAS from the
# machine's CUDA at run time; -Bsymbolic: its functions call each other, not a program's
# functions of the same names), and the tests that load it beside the CPU backend (the
# library's, linked in) and compare the two on the same inputs (tests/cuda/test_cuda_*.c; each
# passes with a message where no GPU is present). The tests are built here with the rest of
# the project and run on a GPU machine (scripts/gpu_check.sh).
# cuBLAS by its development link where the toolkit has one (an installed CUDA 12 or 13: the
# version the library was compiled for), else by the file PyPI's wheel holds (libcublas.so.13).
CUDA_LIBDIRS := $(wildcard $(dir $(NVCC))../lib $(dir $(NVCC))../lib64)
CUBLAS_DEV := $(firstword $(wildcard $(addsuffix /libcublas.so,$(CUDA_LIBDIRS))))
CUBLAS_SO := $(notdir $(firstword $(wildcard $(addsuffix /libcublas.so.[0-9]*,$(CUDA_LIBDIRS)))))
CUDA_LIBS := $(addprefix -L,$(CUDA_LIBDIRS)) $(if $(CUBLAS_DEV),-lcublas -lcublasLt,\
  $(if $(CUBLAS_SO),-l:$(CUBLAS_SO) -l:$(subst libcublas,libcublasLt,$(CUBLAS_SO)),-lcublas -lcublasLt))
build-cuda/libbert_cuda.so: $(CUDA_OBJ)
	$(NVCC_FOUND)
	$(NVCC) -shared $(CUDA_ARCHS) -o $@ $^ -Xlinker -Bsymbolic $(CUDA_LIBS)

CUDA_TEST_SRC := $(sort $(wildcard tests/cuda/test_cuda_*.c))
CUDA_TEST_BIN := $(CUDA_TEST_SRC:tests/cuda/%.c=build-cuda/%)
build-cuda/test_cuda_%: tests/cuda/test_cuda_%.c tests/cuda/cuda_test.h tests/test.h $(BUILD)/libbert.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libbert.a $(LDLIBS) -ldl

cuda-build: cuda-check build-cuda/libbert_cuda.so $(CUDA_TEST_BIN)
cuda-test: cuda-build
	@for t in $(CUDA_TEST_BIN); do echo "== $$t"; OMP_NUM_THREADS=$${OMP_NUM_THREADS:-4} $$t build-cuda/libbert_cuda.so || exit 1; done

# the nvcc and flags build-cuda/ was compiled with, as $(BUILD)'s: a change rebuilds its objects
CUDA_FLAGS_STAMP := build-cuda/nvcc_flags
$(CUDA_FLAGS_STAMP): FORCE
	@mkdir -p build-cuda
	@echo '$(NVCC) $(NVCCFLAGS)' | cmp -s - $@ || echo '$(NVCC) $(NVCCFLAGS)' > $@
build-cuda/%.o: %.cu $(CUDA_FLAGS_STAMP)
	$(NVCC_FOUND)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<

-include $(CUDA_OBJ:.o=.d)

# The CUDA library without a GPU: every .cu file rewritten for the host emulator
# (tests/cuda/emu/: a block's threads as fibers, wmma, cuBLAS's and cuBLASLt's products on the
# CPU, streams and events in call order) and compiled as C++ into build-emu/libbert_cuda_emu.so
# (memory.cu's cuda_scratch made weak: the emulator's gives fresh NaN scratch each call), and
# NCCL as MPI on the host buffers (build-emu/libnccl_emu.so, BERT_NCCL_LIB). `make cuda-emulate`
# runs the CUDA tests against it (tests/cuda/emu/run.sh: two schedules, the attention also fused,
# the products also on plain cuBLAS) and data-parallel pre-training over 2 processes on it
# (tests/test_distributed.c with BERT_TEST_DEVICE=cuda) and the task commands on both devices
# (tests/cuda/emu/commands.sh): about 30 minutes in all. Not part of
# `make test`. docs/gpu.md, "Without a GPU".
EMU_CU := attention layers_norm_act layers_rows linear optim memory lt_matmul collectives
EMU_TESTS := attention norm_act rows linear optim collectives model
# -fsanitize=alignment: a GPU faults on a misaligned access (a uint4 or float4 not 16-byte
# aligned) where x86 does not, so the emulator stops there instead
EMU_SANITIZE := -fsanitize=alignment -fno-sanitize-recover=alignment
EMU_CXXFLAGS := -std=c++17 -O2 -g -fPIC -ffp-contract=off -Wall -Wno-unused-parameter -Wno-unused-function -Wno-unknown-pragmas \
	$(EMU_SANITIZE) -Itests/cuda/emu/include -Isrc
.PRECIOUS: build-emu/%.cpp
build-emu/%.cpp: src/kernels/cuda/%.cu tests/cuda/emu/rewrite.py
	@mkdir -p $(dir $@)
	python3 tests/cuda/emu/rewrite.py $< $@
build-emu/%.o: build-emu/%.cpp $(wildcard tests/cuda/emu/include/*.h) $(wildcard src/kernels/cuda/*.h src/kernels/cuda/*.cuh)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<
build-emu/runtime.o: tests/cuda/emu/runtime.cpp $(wildcard tests/cuda/emu/include/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<
build-emu/cublaslt.o: tests/cuda/emu/cublaslt.cpp $(wildcard tests/cuda/emu/include/*.h) src/kernels/cuda/half_bits.cuh
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<
build-emu/memory_weak.o: build-emu/memory.o
	objcopy $$(nm $< | awk '$$2 == "T" && $$3 ~ /cuda_scratch/ {print "--weaken-symbol=" $$3}') $< $@
build-emu/libbert_cuda_emu.so: build-emu/runtime.o build-emu/cublaslt.o \
		$(patsubst %,build-emu/%.o,$(filter-out memory,$(EMU_CU))) build-emu/memory_weak.o
	$(CXX) $(EMU_SANITIZE) -shared -o $@ $^ -Wl,-Bsymbolic
build-emu/libnccl_emu.so: tests/cuda/emu/nccl_mpi.cpp $(wildcard tests/cuda/emu/include/*.h) src/kernels/cuda/half_bits.cuh
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) $(MPI_CFLAGS) -shared -o $@ $< $(MPI_LIBS)
build-emu/test_cuda_%: tests/cuda/test_cuda_%.c tests/cuda/cuda_test.h tests/test.h $(BUILD)/libbert.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libbert.a $(LDLIBS) -ldl
# BERT_CUDA_LIB=build-emu/libbert_cuda_emu.so ./bert COMMAND --device cuda runs a command on it.
cuda-emulate: build-emu/libbert_cuda_emu.so build-emu/libnccl_emu.so $(BERT) $(EMU_TESTS:%=build-emu/test_cuda_%) \
		$(BUILD)/tests/test_distributed
	@bash tests/cuda/emu/run.sh $(EMU_TESTS) distributed commands