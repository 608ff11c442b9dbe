# dlt — see README, `make help`.
.SUFFIXES:

VERSION = 0.1.0
PREFIX ?= /usr/local
CFLAGS ?= -O2 -g
WERROR ?= -Werror
WARN = -Wall -Wextra $(WERROR) -Wshadow -Wno-unused-parameter
PKGS = openblas libzstd yaml-0.1 libxxhash zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lopenblas -lzstd -lyaml -lxxhash -lz)
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
CUDA_OBJ = $(CUDA_SRC:%.cu=build/%.o)
CUDA_SO = build/libdlt-cuda.so
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

LIB_SRC = $(wildcard lib/*/*.c kernels/cpu/*.c) kernels/cuda_open.c
LIB_OBJ = $(LIB_SRC:%.c=build/%.o)
PROGS = $(patsubst cmd/%.c,bin/%,$(wildcard cmd/dlt-*.c))
UNIT = $(patsubst test/unit/%.c,build/test/%,$(wildcard test/unit/test-*.c))

all: $(PROGS) $(UNIT) $(CUDA_SO) $(MPI_SO)

build/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

build/%.o: %.cu
	@mkdir -p $(@D)
	$(call say,NVCC)
	$(Q)$(NVCC) $(ALL_NVCCFLAGS) -c -o $@ $<

$(CUDA_SO): $(CUDA_OBJ)
	$(call say,NVCC)
	$(Q)$(NVCC) $(CUDA_ARCH) -shared -o $@ $(CUDA_OBJ) $(CUDA_SO_LIBS)

build/kernels/cuda_open.o: ALL_CFLAGS += -DDLT_CUDA=$(CUDA)
build/lib/comm/comm.o: ALL_CFLAGS += -DDLT_MPI=$(MPI)

$(MPI_SO): lib/comm/mpi/mpi.c lib/comm/comm.h
	@mkdir -p $(@D)
	$(call say,MPICC)
	$(Q)$(MPICC) -std=gnu11 $(WARN) $(CFLAGS) -Ilib -I. -shared -fPIC -fvisibility=hidden \
		-o $@ $< -Wl,--no-undefined

build/libdlt.a: $(LIB_OBJ)
	@rm -f $@
	$(call say,AR)
	$(Q)ar rcs $@ $(LIB_OBJ)

bin/%: build/cmd/%.o build/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< build/libdlt.a $(LDLIBS)

build/bench/%: bench/%.c build/libdlt.a
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< build/libdlt.a $(LDLIBS)

build/test/%: build/test/unit/%.o build/test/unit/tap.o build/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< build/test/unit/tap.o build/libdlt.a $(LDLIBS)

build/test/unit/%.o: test/unit/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -Itest/unit -c -o $@ $<

# A fake libnvidia-ml.so.1 for the tests of dlt-smi (test/t8000-smi.sh)
FAKE_NVML = build/test/libfake-nvml.so
all: $(FAKE_NVML)
$(FAKE_NVML): test/fake-nvml.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) -std=gnu11 $(WARN) $(CFLAGS) -shared -fPIC -o $@ $<

deps:
	@scripts/install-deps

# The test suite: unit tests (C, TAP) and program tests (shell, TAP), by prove.
check: deps
	@$(MAKE) --no-print-directory all
	@prove -j2 --timer $(UNIT) test/t[0-9]*.sh

# Trains the MLP of examples/mlp.yaml on Fashion-MNIST and prints test accuracy.
demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

# dlt against PyTorch (python3-torch) on the CPU, side by side, then on the
# GPU where there is one (bench/gpu); see bench/README.
# make bench BENCH=quick: a few hundred steps a run and short accuracy runs;
# BENCH_ARGS: more options of bench/run, e.g. BENCH_ARGS='--reps 3'.
BENCH ?= full
bench: all build/bench/gemm build/bench/codec
	@/usr/bin/python3 bench/run --mode $(BENCH) $(BENCH_ARGS)
	@bench/gpu

install: all
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	cp $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	$(if $(CUDA_SO)$(MPI_SO),mkdir -p $(DESTDIR)$(PREFIX)/lib/dlt && cp $(CUDA_SO) $(MPI_SO) $(DESTDIR)$(PREFIX)/lib/dlt/)
	cp man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	cp man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/

clean:
	rm -rf build bin

help:
	@echo 'make            build libdlt.a, the programs (bin/) and the unit tests'
	@echo 'make check      install missing packages, build, run every test (prove)'
	@echo 'make demo       install, build, train an MLP on Fashion-MNIST, print test accuracy'
	@echo 'make bench      dlt against PyTorch on the CPU, side by side (BENCH=quick: minutes)'
	@echo 'make install    copy programs and man pages under PREFIX (default /usr/local)'
	@echo 'make clean      remove build/ and bin/'
	@echo 'make deps       install the Debian packages dlt needs (scripts/install-deps)'
	@echo 'make check-gpu  the GPU suite: CUDA kernels against the CPU reference, GPU training'
	@echo '                against CPU training (says skipped where there is no CUDA device)'

.PHONY: all deps check demo bench install clean help
.PRECIOUS: build/%.o build/test/unit/%.o build/cmd/%.o

-include $(LIB_OBJ:.o=.d) $(CUDA_OBJ:.o=.d) $(wildcard build/cmd/*.d build/test/unit/*.d)

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
build/kernels/cuda/%.o: NVCCFLAGS += -fmad=false

GPU_TEST = build/gpu/test-cuda
SANITIZER = $(shell command -v compute-sanitizer 2>/dev/null)

build/gpu/%.o: test/gpu/%.c
	@mkdir -p $(@D)
	$(call say,CC)
	$(Q)$(CC) $(ALL_CFLAGS) -Itest/unit -c -o $@ $<

$(GPU_TEST): build/gpu/test-cuda.o build/test/unit/tap.o build/libdlt.a
	@mkdir -p $(@D)
	$(call say,LD)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< build/test/unit/tap.o build/libdlt.a $(LDLIBS)

check-gpu: all $(GPU_TEST)
	@if ! why=$$($(GPU_TEST) --probe); then \
		echo "skipped: no CUDA device ($${why#no CUDA device: })"; exit 0; \
	fi; \
	prove --timer $(GPU_TEST) test/gpu/t-train.sh || exit 1; \
	if [ -n "$(SANITIZER)" ]; then \
		echo "compute-sanitizer memcheck: $(GPU_TEST) (log in build/gpu/memcheck.log)"; \
		DLT_TEST_NO_TIMINGS=1 $(SANITIZER) --error-exitcode 1 --report-api-errors no \
			$(GPU_TEST) >build/gpu/memcheck.log 2>&1 || \
			{ grep -v '^ok ' build/gpu/memcheck.log | tail -40; exit 1; }; \
		tail -1 build/gpu/memcheck.log; \
	fi

.PHONY: check-gpu
.PRECIOUS: build/gpu/%.o
-include $(wildcard build/gpu/*.d)
