# dlt — see README, `make help`.
.SUFFIXES:

VERSION = 0.1.0
PREFIX ?= /usr/local
CFLAGS ?= -O2 -g
WERROR ?= -Werror
WARN = -Wall -Wextra $(WERROR) -Wshadow -Wno-unused-parameter
PKGS = openblas libzstd yaml-0.1 libxxhash zlib libpng libjpeg
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lopenblas -lzstd -lyaml -lxxhash -lz -lpng -ljpeg)
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) -fno-math-errno -fopenmp -pthread -Ilib -I. $(PKG_CFLAGS) \
	-DDLT_VERSION='"$(VERSION)"' -MMD -MP
LDLIBS = $(PKG_LIBS) -ldl -fopenmp -pthread -lm

# make V=1 shows the commands
V = 0
Q_0 = @
Q = $(Q_$(V))
say = $(if $(Q),@echo '  $(1) $@')

# The CUDA backend (kernels/cuda/*.cu) is built wherever nvcc is found, as
# build/libdlt-cuda.so linked with cudart (static), cuBLAS, cuDNN and NCCL; the
# programs open it only when a config asks for a GPU (kernels/cuda_open.c),
# so they start fast and run CPU configs where there is no GPU, driver or
# CUDA library.  make CUDA=0 builds without it.
NVCC ?= $(shell command -v nvcc 2>/dev/null)
CUDA_SRC = $(wildcard kernels/cuda/*.cu)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA ?= $(if $(and $(NVCC),$(CUDA_SRC)),1,0)

# sm_80 (A100), sm_90 (H100), and PTX for the GPUs after them
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O2 -g
ALL_NVCCFLAGS = -std=c++17 $(CUDA_ARCH) $(NVCCFLAGS) -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-fPIC,-fvisibility=hidden \
	-Ilib -I. -MMD -MP
ifeq ($(CUDA),1)
CUDA_OBJ = $(CUDA_SRC:%.cu=$(BUILD)/%.o)
CUDA_SO = $(BUILD)/libdlt-cuda.so
CUDA_SO_LIBS = -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublasLt \
	-lcublas -lnccl -Xlinker --no-undefined
endif

# CPU data parallelism (lib/comm) runs over MPI, from build/libdlt-mpi.so:
# built with mpicc wherever Open MPI is, opened only by jobs of several
# ranks (mpirun, srun), so that other runs never load MPI.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI ?= $(if $(MPICC),1,0)
ifeq ($(MPI),1)
MPI_SO = build/libdlt-mpi.so
endif

# Objects, libraries and tests go under BUILD, programs under BIN: the
# sanitizer build (make check-asan) uses build-asan/ and bin-asan/.
BUILD ?= build
BIN ?= bin
LIB_SRC = $(wildcard lib/*/*.c kernels/cpu/*.c) kernels/cuda_open.c
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
PROGS = $(patsubst cmd/%.c,$(BIN)/%,$(wildcard cmd/dlt-*.c))
UNIT = $(patsubst test/unit/%.c,$(BUILD)/test/%,$(wildcard test/unit/test-*.c))
# The fuzz harnesses of test/fuzz/, each one reader, built with replay.c's
# main for make check (test/t0100-fuzz-corpus.sh) and with libFuzzer for
# make fuzz.
FUZZ_NAMES = $(patsubst test/fuzz/%.c,%,$(filter-out test/fuzz/replay.c,$(wildcard test/fuzz/*.c)))
FUZZ_REPLAY = $(FUZZ_NAMES:%=$(BUILD)/test/fuzz-%)

all: $(PROGS) $(UNIT) $(FUZZ_REPLAY) $(CUDA_SO) $(MPI_SO)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(call say,NVCC)
	$(Q)$(NVCC) $(ALL_NVCCFLAGS) -c -o $@ $<

$(CUDA_SO): $(CUDA_OBJ)
	$(call say,NVCC)
	$(Q)$(NVCC) $(CUDA_ARCH) -shared -o $@ $(CUDA_OBJ) $(CUDA_SO_LIBS)

$(BUILD)/kernels/cuda_open.o: ALL_CFLAGS += -DDLT_CUDA=$(CUDA)
$(BUILD)/lib/comm/comm.o: ALL_CFLAGS += -DDLT_MPI=$(MPI)

$(MPI_SO): lib/comm/mpi/mpi.c lib/comm/comm.h
	@mkdir -p $(@D)
	$(call say,MPICC)
	$(Q)$(MPICC) -std=gnu11 $(WARN) $(CFLAGS) -Ilib -I. -shared -fPIC -fvisibility=hidden \
		-o $@ $< -Wl,--no-undefined

$(BUILD)/libdlt.a: $(LIB_OBJ)
	@rm -f $@
	$(call say,AR)
	$(Q)ar rcs $@ $(LIB_OBJ)

$(BIN)/%: $(BUILD)/cmd/%.o $(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libdlt.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libdlt.a $(LDLIBS)

$(BUILD)/test/%: $(BUILD)/test/unit/%.o $(BUILD)/test/unit/tap.o $(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/test/unit/tap.o $(BUILD)/libdlt.a $(LDLIBS)

$(BUILD)/test/unit/%.o: test/unit/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -Itest/unit -c -o $@ $<

$(BUILD)/test/fuzz-%: $(BUILD)/test/fuzz/%.o $(BUILD)/test/fuzz/replay.o $(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/test/fuzz/replay.o $(BUILD)/libdlt.a $(LDLIBS)

# A fake libnvidia-ml.so.1 for the tests of dlt-smi (test/t8000-smi.sh),
# and a sysconf that fakes the machine's memory (test/t9100-resources.sh)
FAKE_NVML = $(BUILD)/test/libfake-nvml.so
FAKE_MEM = $(BUILD)/test/libfake-mem.so
all: $(FAKE_NVML) $(FAKE_MEM)
$(BUILD)/test/libfake-%.so: test/fake-%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) -std=gnu11 $(WARN) $(CFLAGS) -shared -fPIC -o $@ $< -ldl

# The CPU GEMM's AVX-512 kernels on an emulated CPU that has AVX-512 and
# AVX512_BF16 (test/t0500-gemm-emulated.sh): gemm.c and gemm_bf16.c in a
# static program with no libc and no OpenMP (test/emu/), built with flags
# of their own (no sanitizers: nothing runs under the program but itself;
# libgcc for __builtin_cpu_supports), and the C23 functions that
# bochscpu-python's wheel wants of glibc before 2.38.
ifeq ($(shell uname -m),x86_64)
EMU = $(BUILD)/test/emu/gemm $(BUILD)/test/emu/libc23.so
all: $(EMU)
endif
EMU_CFLAGS = -std=gnu11 $(WARN) -Wno-unknown-pragmas -O2 -g -Ilib -I. $(PKG_CFLAGS) \
	-fno-math-errno -ffp-contract=off -mfma -fno-stack-protector -fno-pie \
	-fno-asynchronous-unwind-tables -ffunction-sections -fdata-sections -MMD -MP
EMU_OBJ = $(addprefix $(BUILD)/test/emu/,gemm.o libc.o kernels-gemm.o kernels-gemm_bf16.o)
$(BUILD)/test/emu/gemm: $(EMU_OBJ)
	$(call say,LD)
	$(Q)$(CC) -static -nostdlib -no-pie -Wl,--gc-sections -Wl,-e,emu_main -o $@ $^ -lgcc
$(BUILD)/test/emu/kernels-%.o: kernels/cpu/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(EMU_CFLAGS) -c -o $@ $<
$(BUILD)/test/emu/%.o: test/emu/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(EMU_CFLAGS) -c -o $@ $<
# (gcc would make libc.c's memcpy loop a call to memcpy)
$(BUILD)/test/emu/libc.o: EMU_CFLAGS += -fno-tree-loop-distribute-patterns
$(BUILD)/test/emu/libc23.so: test/emu/c23.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) -std=c11 $(WARN) -O2 -shared -fPIC -o $@ $<
-include $(wildcard $(BUILD)/test/emu/*.d)

deps:
	@scripts/install-deps

# The op table (test/unit/ops.c): every kernel of a backend against the
# reference, run by test-kernels on the CPU and by test-cuda on a GPU.
OPS_OBJ = $(BUILD)/test/unit/ops.o
$(BUILD)/test/test-kernels $(BUILD)/test/test-layers: $(BUILD)/test/%: $(BUILD)/test/unit/%.o \
		$(OPS_OBJ) $(BUILD)/test/unit/tap.o \
		$(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libdlt.a $(LDLIBS)

# The test suite: unit tests (C, TAP) and program tests (shell, TAP), by prove.
check: deps
	@$(MAKE) --no-print-directory all
	@prove -j2 --timer $(UNIT) test/t[0-9]*.sh
	@$(MAKE) --no-print-directory check-asan
	@$(MAKE) --no-print-directory check-slurm

# The same suite on a build with AddressSanitizer and UndefinedBehavior-
# Sanitizer (build-asan/, bin-asan/; no CUDA: the sanitizers do not see
# into the GPU's memory, make check-gpu runs compute-sanitizer there).
# Every report is fatal (exit 86, which no test expects).  Leaks are
# reported too (detect_leaks=1): the programs free what they allocate, and
# a leak in the library is a leak in a dlt-search or a dlt-smi -l that runs
# for days.  libgomp is not instrumented: ASan sees the OpenMP loops' own
# reads and writes, not the runtime's, and its thread pool is no leak.
SANITIZE = -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined,float-cast-overflow
ASAN_MAKE = BUILD=build-asan BIN=bin-asan CUDA=0 CFLAGS='-O1 -g $(SANITIZE)'
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
	DLT_TEST_BUILD=$(CURDIR)/build-asan DLT_TEST_BIN=$(CURDIR)/bin-asan
check-asan: deps
	@$(MAKE) --no-print-directory $(ASAN_MAKE) all
	@$(ASAN_ENV) prove -j2 --timer $(UNIT:$(BUILD)/%=build-asan/%) test/t[0-9]*.sh

# dlt under a real one-node Slurm (scripts/test-slurm starts it, installing
# slurm-wlm and munge if missing, and stops it whatever the tests did): the
# tests sNNNN-*.sh, one at a time, since they share the cluster's cores and
# look at its whole queue.
check-slurm: all
	@scripts/test-slurm start
	@export $$(scripts/test-slurm env); prove --timer test/s[0-9]*.sh; \
		st=$$?; scripts/test-slurm stop; exit $$st

# make fuzz FUZZ_SECONDS=N: each harness of test/fuzz/ under libFuzzer
# (clang, with ASan and UBSan) for N seconds, from its corpus test/fuzz/NAME/;
# what it finds goes to build-fuzz/corpus/NAME/, a crash to
# build-fuzz/crash-NAME-*, which becomes a file of test/fuzz/NAME/ once
# fixed.  FUZZ=NAME runs one harness.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ ?= $(FUZZ_NAMES)
FUZZ_MAKE = BUILD=build-fuzz BIN=bin-fuzz CUDA=0 CC=$(FUZZ_CC) WERROR= \
	CFLAGS='-O1 -g -fsanitize=fuzzer-no-link $(SANITIZE) -Wno-pass-failed'
fuzz:
	@$(MAKE) --no-print-directory $(FUZZ_MAKE) $(FUZZ:%=build-fuzz/libfuzzer-%)
	@for n in $(FUZZ); do \
		mkdir -p build-fuzz/corpus/$$n && \
		echo "fuzz: $$n for $(FUZZ_SECONDS) s" && \
		build-fuzz/libfuzzer-$$n -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=30 \
			-print_final_stats=1 \
			-artifact_prefix=build-fuzz/crash-$$n- build-fuzz/corpus/$$n test/fuzz/$$n \
			2>build-fuzz/$$n.log || { tail -60 build-fuzz/$$n.log; exit 1; }; \
		grep -E '^(stat::number_of_executed_units|Done)' build-fuzz/$$n.log; \
	done

build-fuzz/libfuzzer-%: build-fuzz/test/fuzz/%.o build-fuzz/libdlt.a
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/libdlt.a $(LDLIBS)

# Trains the MLP of examples/mlp.yaml on Fashion-MNIST and prints test accuracy.
demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

# dlt against PyTorch (python3-torch) on the CPU, side by side, then on the
# GPU where there is one (bench/gpu), then an ASHA search against training
# its trials fully (bench/search-asha, BENCH=full only); see bench/README.
# make bench BENCH=quick: a few hundred steps a run and short accuracy runs;
# BENCH_ARGS: more options of bench/run, e.g. BENCH_ARGS='--reps 3'.
BENCH ?= full
bench: all $(BUILD)/bench/gemm $(BUILD)/bench/codec
	@/usr/bin/python3 bench/run --mode $(BENCH) $(BENCH_ARGS)
	-@/usr/bin/python3 bench/tasks --bin $(BIN)
	-@/usr/bin/python3 bench/gpt --bin $(BIN) --build $(BUILD) $(if $(filter quick,$(BENCH)),--quick)
	-@/usr/bin/python3 bench/dist --bin $(BIN) --build $(BUILD) $(if $(filter quick,$(BENCH)),--quick)
	@bench/gpu
	@$(if $(filter full,$(BENCH)),bench/search-asha,echo 'bench/search-asha: left out of BENCH=$(BENCH)')

install: all
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	cp $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	$(if $(CUDA_SO)$(MPI_SO),mkdir -p $(DESTDIR)$(PREFIX)/lib/dlt && cp $(CUDA_SO) $(MPI_SO) $(DESTDIR)$(PREFIX)/lib/dlt/)
	cp man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	cp man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/

clean:
	rm -rf build bin build-asan bin-asan build-fuzz

help:
	@echo 'make            build libdlt.a, the programs (bin/) and the unit tests'
	@echo 'make check      install missing packages, build, run every test (prove), then'
	@echo '                make check-asan and make check-slurm'
	@echo 'make check-asan every test again on a build with ASan and UBSan (build-asan/)'
	@echo 'make check-slurm the tests of dlt under Slurm, on a one-node cluster that'
	@echo '                scripts/test-slurm starts and stops'
	@echo 'make fuzz       each fuzz harness of test/fuzz/ under libFuzzer (clang) for'
	@echo '                FUZZ_SECONDS (60); FUZZ=NAME for one'
	@echo 'make demo       install, build, train an MLP on Fashion-MNIST, print test accuracy'
	@echo 'make bench      dlt against PyTorch on the CPU, side by side (BENCH=quick: minutes)'
	@echo 'make install    copy programs and man pages under PREFIX (default /usr/local)'
	@echo 'make clean      remove build/ and bin/'
	@echo 'make deps       install the Debian packages dlt needs (scripts/install-deps)'
	@echo 'make check-gpu  the GPU suite: CUDA kernels against the CPU reference, GPU training'
	@echo '                against CPU training (says skipped where there is no CUDA device)'

.PHONY: all deps check check-asan check-slurm fuzz demo bench install clean help
.PRECIOUS: $(BUILD)/%.o $(BUILD)/test/unit/%.o $(BUILD)/cmd/%.o $(BUILD)/test/fuzz/%.o

-include $(LIB_OBJ:.o=.d) $(CUDA_OBJ:.o=.d) $(wildcard $(BUILD)/cmd/*.d $(BUILD)/test/unit/*.d $(BUILD)/test/fuzz/*.d)

# ---- The GPU suite: make check-gpu -------------------------------------
# build/gpu/test-cuda checks every entry of the CUDA backend against the
# reference backend; test/gpu/t-train.sh trains on the GPU and on the CPU
# and compares.  Then memcheck of compute-sanitizer (where installed) runs
# test-cuda again; it reports no API errors, since cuBLAS and cuDNN probe
# with calls that fail on purpose, and so does our test of a failed alloc.
# Where there is no CUDA device (or no CUDA build) it says so and passes.
#
# The CUDA backend is built without fused multiply-add contraction, so
# that a * b + c rounds twice as in the CPU's plain x86-64 code: its
# element-wise kernels give the CPU's bits.
$(BUILD)/kernels/cuda/%.o: NVCCFLAGS += -fmad=false

GPU_TEST = $(BUILD)/gpu/test-cuda
SANITIZER = $(shell command -v compute-sanitizer 2>/dev/null)

$(BUILD)/gpu/%.o: test/gpu/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -Itest/unit -c -o $@ $<

$(GPU_TEST): $(BUILD)/gpu/test-cuda.o $(OPS_OBJ) $(BUILD)/test/unit/tap.o $(BUILD)/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libdlt.a $(LDLIBS)

check-gpu: all $(GPU_TEST)
	@if ! why=$$($(GPU_TEST) --probe); then \
		echo "skipped: no CUDA device ($${why#no CUDA device: })"; exit 0; \
	fi; \
	prove --timer $(GPU_TEST) test/gpu/t-train.sh || exit 1; \
	if [ -n "$(SANITIZER)" ]; then \
		echo "compute-sanitizer memcheck: $(GPU_TEST) (log in $(BUILD)/gpu/memcheck.log)"; \
		DLT_TEST_NO_TIMINGS=1 $(SANITIZER) --error-exitcode 1 --report-api-errors no \
			$(GPU_TEST) >$(BUILD)/gpu/memcheck.log 2>&1 || \
			{ grep -v '^ok ' $(BUILD)/gpu/memcheck.log | tail -40; exit 1; }; \
		tail -1 $(BUILD)/gpu/memcheck.log; \
	fi

.PHONY: check-gpu
.PRECIOUS: $(BUILD)/gpu/%.o
-include $(wildcard $(BUILD)/gpu/*.d)
