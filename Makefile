# libprof — a profiler for unmodified Linux programs, loaded with LD_PRELOAD.
#
# Options (set on the command line, e.g. `make V=1 BUILD=/tmp/b`):
#   PREFIX   installation prefix                      (default /usr/local)
#   VENV     the project's Python environment         (default /opt/libprof-venv)
#   DESTDIR  staging root prepended at install time   (default empty)
#   BUILD    output directory for everything built    (default build)
#   V=1      show the full compiler commands
#   CC CFLAGS LDFLAGS   as usual; CFLAGS replaces the optimisation/debug flags only
#
# Targets:
#   all        build/libprof.so, build/libprof-report, build/libprof (wrapper)
#   deps       install what the tests need: Debian packages, the Python environment (scripts/install-deps)
#   tests-build  build everything the tests run (then one suite can be run by hand)
#   test       deps + all + every test (unit, integration, fuzz); what CI runs
#   check      the edit loop's tests: format, unit and the quick integration suites (about a minute)
#   demo       the build's packages and sqlite3 (only those) + all + profile a real program and
#              print where the trace went
#   bench      deps and the benchmark tools + overhead benchmarks against bare runs, memusage and
#              heaptrack, and beside memray, py-spy, Scalene and Austin (scripts/bench-peers.py);
#              call stacks on PyTorch's import and a training run beside memray and py-spy
#   wheel      dist/libprof-VERSION-py3-none-manylinux_*.whl (scripts/libprof_build.py; also what
#              `pip install .` builds)
#   fuzz       a short libFuzzer run on the raw-trace decoder (FUZZ_RUNS=N executions, FUZZ_SEED=S)
#   format     apply .clang-format to every C source and header of the tree
#   format-check   say where the tree departs from .clang-format (part of test)
#   man        remake docs/man/ from the code's tables (scripts/gen-man)
#   install / uninstall / clean

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
V       ?= 0
CC      ?= cc
CXX     ?= c++
CFLAGS  ?= -O2 -g
FUZZ_CC ?= clang
FUZZ_RUNS ?= 50000
FUZZ_SEED ?= 1 # the same inputs every run (make test repeats); FUZZ_SEED=0: a new seed each time

BINDIR  = $(PREFIX)/bin
LIBDIR  = $(PREFIX)/lib
INCDIR  = $(PREFIX)/include

ifeq ($(V),1)
Q =
else
Q = @
endif

# Flags every object gets. -fvisibility=hidden: only the symbols named in preload/libprof.map
# leave the shared object. initial-exec TLS: one %fs-relative access on the hot path.
WARN     = -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes
ALL_CFLAGS = -std=gnu11 $(CFLAGS) $(WARN) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
             -I. -Iinclude -MMD -MP
# elfutils' headers (libdw-dev): the source lines of native frames, libdw loaded at run time by
# libprof-report (lib/dwarf.c); without them the build goes on and frames are named by symbols.
ifneq ($(wildcard /usr/include/elfutils/libdwfl.h),)
ALL_CFLAGS += -DLP_HAVE_LIBDW
endif
PRELOAD_LDFLAGS = -shared -Wl,--version-script=preload/libprof.map -Wl,-z,now -Wl,-z,nodelete

# ---- sources, one per line ---------------------------------------------------------------------
CORE_SRCS += preload/core/blocks.c
CORE_SRCS += preload/core/call.c
CORE_SRCS += preload/core/clock.c
CORE_SRCS += preload/core/config.c
CORE_SRCS += preload/core/control.c
CORE_SRCS += preload/core/release.c
CORE_SRCS += preload/core/life.c
CORE_SRCS += preload/core/handoff.c
CORE_SRCS += preload/core/lineage.c
CORE_SRCS += preload/core/log.c
CORE_SRCS += preload/core/names.c
CORE_SRCS += preload/core/nodes.c
CORE_SRCS += preload/core/own.c
CORE_SRCS += preload/core/os_real.c
CORE_SRCS += preload/core/python.c
CORE_SRCS += preload/core/python_detect.c
CORE_SRCS += preload/core/python_probe.c
CORE_SRCS += preload/core/python_lines.c
CORE_SRCS += preload/core/real.c
CORE_SRCS += preload/core/sample.c
CORE_SRCS += preload/core/spawn.c
CORE_SRCS += preload/core/state.c
CORE_SRCS += preload/core/stacks.c
CORE_SRCS += preload/core/tbuf.c
CORE_SRCS += preload/core/unhook.c
CORE_SRCS += preload/core/walk.c

HOOK_SRCS += preload/hooks/alloc.c
HOOK_SRCS += preload/hooks/annot.c
HOOK_SRCS += preload/hooks/blas.c
HOOK_SRCS += preload/hooks/dl.c
HOOK_SRCS += preload/hooks/dnnl.c
HOOK_SRCS += preload/hooks/exec.c
HOOK_SRCS += preload/hooks/exit.c
HOOK_SRCS += preload/hooks/io.c
HOOK_SRCS += preload/hooks/omp.c
HOOK_SRCS += preload/hooks/net.c
HOOK_SRCS += preload/hooks/python.c
HOOK_SRCS += preload/hooks/torch.c
HOOK_SRCS += preload/hooks/ort.c
HOOK_SRCS += preload/hooks/executorch.c
HOOK_SRCS += preload/hooks/cuda.c
HOOK_SRCS += preload/hooks/cupti.c
HOOK_SRCS += preload/hooks/kernels.c
HOOK_SRCS += preload/hooks/nvtx.c
HOOK_SRCS += preload/hooks/cublas.c
HOOK_SRCS += preload/hooks/nccl.c
HOOK_SRCS += preload/hooks/mpi.c
HOOK_SRCS += preload/hooks/process.c
HOOK_SRCS += preload/hooks/signal.c
HOOK_SRCS += preload/hooks/sync.c
HOOK_SRCS += preload/hooks/thread.c
HOOK_SRCS += preload/hooks/unwind.c
HOOK_SRCS += preload/hooks/wait.c

# lib/: what the recorder and the tools share — the format's tables, the decoder, the converter
# and its writers — compiled into libprof.so (the conversion at exit) and into libprof-report
# (uftrace's utils/ idea): neither re-implements the format.
LIB_SRCS += lib/format_tables.c
LIB_SRCS += lib/pb.c
LIB_SRCS += lib/reader.c
LIB_SRCS += lib/nodes.c
LIB_SRCS += lib/convert.c
LIB_SRCS += lib/outputs.c
LIB_SRCS += lib/views.c
LIB_SRCS += lib/gil.c
LIB_SRCS += lib/pycalls.c
LIB_SRCS += lib/ort.c
LIB_SRCS += lib/etdump.c
LIB_SRCS += lib/cudamem.c
LIB_SRCS += lib/gpu.c
LIB_SRCS += lib/torch.c
LIB_SRCS += lib/nvtx.c
LIB_SRCS += lib/async.c
LIB_SRCS += lib/write_chrome.c
LIB_SRCS += lib/write_perfetto.c
LIB_SRCS += lib/pftrace_out.c
LIB_SRCS += lib/pftrace_profile.c
LIB_SRCS += lib/deflate.c
LIB_SRCS += lib/write_tables.c
LIB_SRCS += lib/json.c
LIB_SRCS += lib/describe.c
LIB_SRCS += lib/slices.c
LIB_SRCS += lib/calls.c
LIB_SRCS += lib/sites.c
LIB_SRCS += lib/samples.c
LIB_SRCS += lib/speedscope.c
LIB_SRCS += lib/pprof.c
LIB_SRCS += lib/symbols.c
LIB_SRCS += lib/dwarf.c
LIB_SRCS += lib/map.c
LIB_SRCS += lib/out.c
LIB_SRCS += lib/vec.c

# lib/os.h for the tools: the C library itself (inside the program, preload/core/os_real.c).
TOOL_OS_SRCS += tools/os_libc.c

REPORT_SRCS += tools/libprof-report.c
REPORT_SRCS += tools/cli.c
REPORT_SRCS += tools/run.c
REPORT_SRCS += tools/live.c
REPORT_SRCS += tools/pack.c
REPORT_SRCS += tools/chrome_in.c
REPORT_SRCS += tools/pftrace_in.c
REPORT_SRCS += tools/report.c
REPORT_SRCS += tools/events_csv.c
REPORT_SRCS += tools/merge.c
REPORT_SRCS += tools/skew.c
REPORT_SRCS += tools/html.c
REPORT_SRCS += tools/html_cpu.c
REPORT_SRCS += tools/flame.c
REPORT_SRCS += tools/page.c

UNIT_TESTS += tests/unit/test_config.c
UNIT_TESTS += tests/unit/test_out.c
UNIT_TESTS += tests/unit/test_format.c
UNIT_TESTS += tests/unit/test_tbuf.c
UNIT_TESTS += tests/unit/test_map.c
UNIT_TESTS += tests/unit/test_blocks.c

INTEGRATION_TESTS += tests/integration/test_alloc.c
INTEGRATION_TESTS += tests/integration/test_calls.c
INTEGRATION_TESTS += tests/integration/test_stacks.c
INTEGRATION_TESTS += tests/integration/test_analysis.c
INTEGRATION_TESTS += tests/integration/test_programs.c
INTEGRATION_TESTS += tests/integration/test_report.c
INTEGRATION_TESTS += tests/integration/test_annot.c
INTEGRATION_TESTS += tests/integration/test_control.c
INTEGRATION_TESTS += tests/integration/test_stress.c
INTEGRATION_TESTS += tests/integration/test_signals.c
INTEGRATION_TESTS += tests/integration/test_torch.c
INTEGRATION_TESTS += tests/integration/test_docs.c
INTEGRATION_TESTS += tests/integration/test_crashes.c
INTEGRATION_TESTS += tests/integration/test_convert.c
INTEGRATION_TESTS += tests/integration/test_exec.c
INTEGRATION_TESTS += tests/integration/test_perfetto.c
INTEGRATION_TESTS += tests/integration/test_coexist.c
INTEGRATION_TESTS += tests/integration/test_house.c
INTEGRATION_TESTS += tests/integration/test_python.c
INTEGRATION_TESTS += tests/integration/test_ort.c
INTEGRATION_TESTS += tests/integration/test_executorch.c
INTEGRATION_TESTS += tests/integration/test_cuda.c
INTEGRATION_TESTS += tests/integration/test_memviews.c
INTEGRATION_TESTS += tests/integration/test_mpi.c
INTEGRATION_TESTS += tests/integration/test_reliab.c
INTEGRATION_TESTS += tests/integration/test_private.c
INTEGRATION_TESTS += tests/integration/test_sample.c
INTEGRATION_TESTS += tests/integration/test_stream.c
INTEGRATION_TESTS += tests/integration/test_wheel.c
TEST_HELPER_SRCS  += tests/integration/harness.c

PROGS += tests/progs/allocs.c
PROGS += tests/progs/calls.c
PROGS += tests/progs/bound.c
PROGS += tests/progs/sites.c
PROGS += tests/progs/stackfan.c
PROGS += tests/progs/altstack.c
PROGS += tests/progs/sampled.c
PROGS += tests/progs/call_loop.c
PROGS += tests/progs/threads.c
PROGS += tests/progs/forker.c
PROGS += tests/progs/forkloader.c
PROGS += tests/progs/annotated.c
PROGS += tests/progs/phases.c
PROGS += tests/progs/annot_loop.c
PROGS += tests/progs/stress.c
PROGS += tests/progs/crash.c
PROGS += tests/progs/crashers.c
PROGS += tests/progs/chains.c
PROGS += tests/progs/execfail.c
PROGS += tests/progs/spawner.c
PROGS += tests/progs/dlhost.c
PROGS += tests/progs/pyembed.c
PROGS += tests/progs/memviews.c
PROGS += tests/progs/reliab.c
PROGS += tests/progs/cpusplit.c
PROGS += tests/progs/torchhost.c
PROGS += tests/progs/netpeers.c
PROGS += tests/progs/service.c
PROGS += tests/progs/timeline.c
PROGS += tests/progs/sigswitch.c
PROGS_CXX += tests/progs/annotated_cpp.cpp

# The project's Python environment (scripts/install-deps, scripts/requirements.txt): PyPI's
# onnxruntime wheel ships the C API library, libonnxruntime.so.1.N; the C programs of the ort tests
# link it through a link named by its soname in $(BUILD)/ort (the wheel has no such name). Not built
# when the environment is absent (those tests then skip).
VENV    ?= /opt/libprof-venv
ORT_WHEEL_LIB = $(firstword $(wildcard $(VENV)/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.*))
ORT_LIB = $(abspath $(BUILD))/ort/libonnxruntime.so.1
ORT_PROGS = $(if $(ORT_WHEEL_LIB),$(BUILD)/progs/ortc $(BUILD)/progs/ortdl $(BUILD)/progs/ortapi $(BUILD)/progs/ortrun)
# Go's own pprof, built offline from Debian's sources of it (golang-github-google-pprof-dev) with
# Debian's Go: a reader of libprof's pprof files that libprof did not write.
PPROF_SRC = /usr/share/gocode/src/github.com/google/pprof
PPROF_BIN = $(if $(and $(wildcard $(PPROF_SRC)/pprof.go),$(wildcard /usr/bin/go)),$(BUILD)/go/pprof)
# A C++ program linked to libtorch, when Debian's libtorch-dev is there (the test skips otherwise),
# and a library named like a libtorch of a version libprof does not know.
# The same program linked to the environment's PyTorch 2.x wheel (torch/include, torch/lib).
TORCH_WHEEL = $(patsubst %/include/ATen/ATen.h,%,$(firstword $(wildcard $(VENV)/lib/python3*/site-packages/torch/include/ATen/ATen.h)))
TORCH_PROGS = $(if $(wildcard /usr/include/ATen/ATen.h),$(BUILD)/progs/torchc) $(BUILD)/progs/faketorch/libtorch_cpu.so.9.99 \
              $(if $(TORCH_WHEEL),$(BUILD)/progs/torchc2)
# ExecuTorch: the model of tests/progs/et_model.py exported once to a .pte by the environment's
# executorch (its exporter takes about 20 s), and a C++ program run by ExecuTorch's own C++ runtime
# (the libraries and headers scripts/install-deps unpacks into $(VENV)/executorch-sdk).
ET_SDK  = $(VENV)/executorch-sdk/executorch
ET_PROGS = $(if $(wildcard $(VENV)/lib/python3*/site-packages/executorch/exir),$(BUILD)/progs/et_model.pte) \
           $(if $(wildcard $(ET_SDK)/include/executorch),$(BUILD)/progs/etrun)
# A CUDA program built with the CUDA toolkit's nvcc, its runtime a shared library (-cudart shared:
# how PyTorch has it, and the one libprof sees), when the toolkit is at $(CUDA) (the cuda tests skip
# otherwise). It runs with or without a GPU.
CUDA    ?= /usr/local/cuda
CUDA_PROGS = $(if $(wildcard $(CUDA)/bin/nvcc),$(BUILD)/progs/cudaprog $(BUILD)/progs/fakecuda/libcudart.so.13 $(BUILD)/progs/fakecuda/libcupti.so.13 $(BUILD)/progs/fakecuda/libcublas.so.13) \
             $(if $(wildcard $(CUDA)/include/nvtx3/nvToolsExt.h),$(BUILD)/progs/nvtxprog) \
             $(if $(wildcard $(CUDA)/lib/libnccl.so),$(if $(wildcard $(CUDA)/lib64/libcublas.so),$(BUILD)/progs/gpulibs))
# An MPI program, when Debian's Open MPI compiler wrapper is there (the mpi tests skip otherwise).
MPI_PROGS = $(if $(wildcard /usr/bin/mpicc),$(BUILD)/progs/mpiring)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
CORE_OBJS   = $(call obj,$(CORE_SRCS))
HOOK_OBJS   = $(call obj,$(HOOK_SRCS))
LIB_OBJS = $(call obj,$(LIB_SRCS))
REPORT_OBJS = $(call obj,$(REPORT_SRCS) $(TOOL_OS_SRCS))
UNIT_BINS   = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_TESTS))
INTEG_BINS  = $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEGRATION_TESTS))
PROG_BINS   = $(patsubst tests/progs/%.c,$(BUILD)/progs/%,$(PROGS)) $(BUILD)/progs/libplugin.so $(BUILD)/progs/sites_cxx \
              $(BUILD)/progs/libaltshim.so \
              $(BUILD)/progs/rpath_dlopen $(BUILD)/progs/ownalloc $(BUILD)/progs/static_reliab \
              $(BUILD)/progs/lines $(BUILD)/progs/lines_stripped $(BUILD)/progs/lines_linked \
              $(BUILD)/progs/libthrower.so \
              $(patsubst tests/progs/%.cpp,$(BUILD)/progs/%,$(PROGS_CXX)) $(ORT_PROGS) $(TORCH_PROGS) \
              $(MPI_PROGS) $(PPROF_BIN) $(ET_PROGS) $(CUDA_PROGS)

TARGETS = $(BUILD)/libprof.so $(BUILD)/libprof-report $(BUILD)/libprof

.PHONY: all deps demo-deps bench-deps test check tests-build unit integration fuzz demo wheel bench man install uninstall clean format format-check
all: $(TARGETS)

# A stamp that changes when the flags do, so a flag change rebuilds everything.
FLAGS_STAMP = $(BUILD)/.flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libprof.so: $(CORE_OBJS) $(HOOK_OBJS) $(LIB_OBJS) preload/libprof.map
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(ALL_CFLAGS) $(PRELOAD_LDFLAGS) $(LDFLAGS) -o $@ $(CORE_OBJS) $(HOOK_OBJS) $(LIB_OBJS) -ldl -lpthread

$(BUILD)/libprof-report: $(REPORT_OBJS) $(LIB_OBJS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ -lcjson -lm

$(BUILD)/libprof: scripts/libprof
	@mkdir -p $(BUILD)
	$(Q)cp $< $@ && chmod +x $@

# ---- tests ---------------------------------------------------------------------------------
# The tests' own code unoptimised (-O0: a test binary compiles in a third of the time, and what it
# tests — the library objects it links, the preload, libprof-report — is built as always).
TEST_CFLAGS = $(ALL_CFLAGS) -O0 -Wno-missing-prototypes -I. -DLP_BUILD_DIR='"$(abspath $(BUILD))"' \
              -DLP_SOURCE_DIR='"$(abspath .)"' \
              -DLP_VENV='"$(VENV)"'

$(BUILD)/tests/%: tests/unit/%.c $(CORE_OBJS) $(LIB_OBJS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  TEST    $@')
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $< $(CORE_OBJS) $(LIB_OBJS) -lcriterion -lcjson -lpthread -ldl

TOOL_OS_OBJS = $(call obj,$(TOOL_OS_SRCS))
$(BUILD)/tests/%: tests/integration/%.c $(TEST_HELPER_SRCS) tests/integration/harness.h $(LIB_OBJS) $(TOOL_OS_OBJS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  TEST    $@')
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $< $(TEST_HELPER_SRCS) $(LIB_OBJS) $(TOOL_OS_OBJS) -lcriterion -lcjson -lpthread

$(BUILD)/progs/%: tests/progs/%.c include/libprof.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fno-builtin -Wall -Wextra -Iinclude -o $@ $< -lpthread -ldl

# The sites program again, with libstdc++ loaded: heaptrack's preload loads it into every program
# it runs, so the heap peaks compare only when both runs have it.
$(BUILD)/progs/sites_cxx: tests/progs/sites.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fno-builtin -Wall -Wextra -o $@ $< -Wl,--no-as-needed -lstdc++

$(BUILD)/progs/torchc: tests/progs/torchc.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CXX) -std=c++17 -O1 -w -o $@ $< -ltorch_cpu -lc10

$(BUILD)/progs/torchc2: tests/progs/torchc.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CXX) -std=c++17 -O1 -w -o $@ $< -I$(TORCH_WHEEL)/include -I$(TORCH_WHEEL)/include/torch/csrc/api/include \
	    -L$(TORCH_WHEEL)/lib -Wl,-rpath,$(TORCH_WHEEL)/lib -ltorch_cpu -lc10

# (the export takes ~15 s: its result is kept in the user's cache under the hash of the script
# and the exporter's version, so that a fresh clone on a machine that made it once copies it)
ET_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/libprof
$(BUILD)/progs/et_model.pte: tests/progs/et_model.py
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PTE     $@')
	$(Q)key=$$( { cat $<; ls -d $(VENV)/lib/python3*/site-packages/executorch-*.dist-info; } | sha256sum | cut -c1-16); \
	if [ -s "$(ET_CACHE)/et_model.$$key.pte" ]; then cp "$(ET_CACHE)/et_model.$$key.pte" $@; exit 0; fi; \
	$(VENV)/bin/python3 $< export $@.tmp 2>$(BUILD)/progs/et_model.log && mv $@.tmp $@ || { cat $(BUILD)/progs/et_model.log; exit 1; }; \
	mkdir -p "$(ET_CACHE)" && cp $@ "$(ET_CACHE)/et_model.$$key.pte.tmp" && mv "$(ET_CACHE)/et_model.$$key.pte.tmp" "$(ET_CACHE)/et_model.$$key.pte" || true

$(BUILD)/progs/cudaprog: tests/progs/cudaprog.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  NVCC    $@')
	$(Q)$(CUDA)/bin/nvcc -cudart shared -O1 -o $@ $<

# a stand-in for the CUDA runtime where there is no GPU (the cuda tests' successful calls)
$(BUILD)/progs/fakecuda/libcudart.so.13: tests/progs/fakecudart.c tests/progs/fakecudart.map $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -shared -fPIC -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/progs/fakecudart.map -o $@ $<

# a stand-in for CUPTI beside it: fakecudart's work on a made-up device (the GPU times' tests),
# its records laid out by the toolkit's own header
$(BUILD)/progs/fakecuda/libcupti.so.13: tests/progs/fakecupti.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -shared -fPIC -I$(CUDA)/include -Wl,-soname,libcupti.so.13 -o $@ $< -lpthread

# a stand-in for cuBLAS beside them: GEMMs that run a kernel on fakecupti's device (their GFLOP/s)
$(BUILD)/progs/fakecuda/libcublas.so.13: tests/progs/fakecublas.c tests/progs/fakecublas.map $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -shared -fPIC -Wl,-soname,libcublas.so.13 -Wl,--version-script=tests/progs/fakecublas.map -o $@ $< -ldl

# cuBLAS and NCCL, the toolkit's own libraries, called with no GPU (each returns its error)
$(BUILD)/progs/gpulibs: tests/progs/gpulibs.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -Wall -o $@ $< -I$(CUDA)/include -L$(CUDA)/lib64 -L$(CUDA)/lib -Wl,-rpath,$(CUDA)/lib64:$(CUDA)/lib -lcublas -lcublasLt -lnccl

$(BUILD)/progs/nvtxprog: tests/progs/nvtxprog.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -Wall -o $@ $< -I$(CUDA)/include -ldl -lpthread

$(BUILD)/progs/etrun: tests/progs/etrun.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CXX) -std=c++17 -O1 -w -DC10_USING_CUSTOM_GENERATED_MACROS -DET_EVENT_TRACER_ENABLED -o $@ $< \
	    -I$(ET_SDK)/include -I$(ET_SDK)/include/executorch/runtime/core/portable_type/c10 \
	    -L$(ET_SDK)/lib -Wl,-rpath,$(ET_SDK)/lib -Wl,--no-as-needed -lexecutorch -lexecutorch_kernels_optimized \
	    -lexecutorch_backend_xnnpack -lexecutorch_etdump -lexecutorch_threadpool

$(BUILD)/progs/faketorch/libtorch_cpu.so.9.99: tests/progs/faketorch.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -fPIC -shared -Wall -Wextra -o $@ $<

# C++ exceptions in a library, for the sampler's churn test.
$(BUILD)/progs/libthrower.so: tests/progs/thrower.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CXX) -O1 -g -fPIC -shared -Wall -Wextra -o $@ $<

# The reliability program linked statically: a profiled process that execs it is told, once, that
# LD_PRELOAD cannot reach it.
$(BUILD)/progs/static_reliab: tests/progs/reliab.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fno-builtin -Wall -Wextra -static -o $@ $< -lpthread

# Finds libplugin.so only through its own DT_RUNPATH ($$ORIGIN): see tests/progs/rpath_dlopen.c.
$(BUILD)/progs/rpath_dlopen: tests/progs/rpath_dlopen.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< -ldl -Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN'

# Native source lines (tests/progs/lines.c): built -g -O2, so a helper is inlined; and the same
# program stripped, its debug information apart in debugdir/ (what a distribution ships and a
# debuginfod server serves), found back by build-id.
$(BUILD)/progs/lines: tests/progs/lines.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wl,--build-id -o $@ $<

$(BUILD)/progs/lines_stripped: $(BUILD)/progs/lines
	@mkdir -p $(BUILD)/progs/debugdir
	@$(if $(Q),echo '  PROG    $@')
	$(Q)objcopy --only-keep-debug $< $(BUILD)/progs/debugdir/lines.debug
	$(Q)objcopy --strip-all $< $@

# ... and stripped with a .gnu_debuglink to its debug file in .debug/ beside it, where gdb and
# libdwfl look.
$(BUILD)/progs/lines_linked: $(BUILD)/progs/lines_stripped
	@mkdir -p $(BUILD)/progs/.debug
	@$(if $(Q),echo '  PROG    $@')
	$(Q)cp $(BUILD)/progs/debugdir/lines.debug $(BUILD)/progs/.debug/lines_linked.debug
	$(Q)objcopy --strip-all --add-gnu-debuglink=$(BUILD)/progs/.debug/lines_linked.debug $(BUILD)/progs/lines $@

# An allocator built into the executable (exported malloc family), first used by the
# constructor of a library it links: see tests/progs/ownalloc.c.
$(BUILD)/progs/ownalloc: tests/progs/ownalloc.c $(BUILD)/progs/libownalloc_dep.so $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Wl,--export-dynamic -o $@ $< -Wl,--no-as-needed \
		-L$(BUILD)/progs -lownalloc_dep -Wl,-rpath,'$$ORIGIN'

$(BUILD)/progs/libownalloc_dep.so: tests/progs/ownalloc_dep.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fPIC -shared -Wall -Wextra -o $@ $<

$(ORT_LIB): $(ORT_WHEEL_LIB)
	@mkdir -p $(dir $@)
	$(Q)ln -sf $< $@

ORT_LINK = $(ORT_LIB) -Wl,-rpath,$(dir $(ORT_LIB))
$(BUILD)/progs/ortc: tests/progs/ortc.c $(ORT_LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< $(ORT_LINK)

$(BUILD)/progs/ortrun: tests/progs/ortrun.c $(ORT_LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< $(ORT_LINK)

$(BUILD)/progs/ortapi: tests/progs/ortapi.c $(ORT_LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< $(ORT_LINK) -pthread

# (Go's build cache is the user's, beside ExecuTorch's model: a fresh clone builds pprof in a
# second, not in five)
GO_CACHE ?= $(ET_CACHE)/go-build
$(BUILD)/go/pprof: $(PPROF_SRC)/pprof.go
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  GO      $@')
	$(Q)GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$(GO_CACHE) GOFLAGS= go build -o $@ github.com/google/pprof

$(BUILD)/progs/mpiring: tests/progs/mpiring.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)mpicc -std=gnu11 -O1 -g -Wall -Wextra -o $@ $<

$(BUILD)/progs/ortdl: tests/progs/ortc.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -DORT_DLOPEN -o $@ $< -ldl

$(BUILD)/progs/libaltshim.so: tests/progs/altshim.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fPIC -shared -Wall -Wextra -o $@ $< -ldl

$(BUILD)/progs/libplugin.so: tests/progs/plugin.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CC) -std=gnu11 -O1 -g -fno-builtin -fPIC -shared -Wall -Wextra -o $@ $<

# C++ test programs: -fexceptions matters, the cleanup attribute must run during unwinding.
$(BUILD)/progs/%: tests/progs/%.cpp include/libprof.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  PROG    $@')
	$(Q)$(CXX) -O1 -g -Wall -Wextra -Iinclude -o $@ $< -lpthread

# The fuzz targets are built with clang, ASan and UBSan from the sources themselves: each source
# instrumented once (coverage for libFuzzer, the sanitizers) into an archive both targets link.
FUZZ_CFLAGS = -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -Iinclude -I.
FUZZ_SRCS = $(LIB_SRCS) $(TOOL_OS_SRCS) tools/report.c tools/events_csv.c tools/chrome_in.c tools/pftrace_in.c \
	tools/pack.c
FUZZ_OBJS = $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(FUZZ_SRCS))
$(BUILD)/fuzz/obj/%.o: %.c $(wildcard tools/*.h lib/*.h) include/libprof/format.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  FUZZCC  $<')
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/libprof-fuzz.a: $(FUZZ_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzz/libprof-fuzz.a
	@$(if $(Q),echo '  FUZZ    $@')
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/fuzz/libprof-fuzz.a -lcjson -lm

# New inputs go to build/fuzz/corpus*; tests/fuzz/corpus* hold the committed seeds.
FUZZ_RUN = mkdir -p $(BUILD)/fuzz/$(2); echo "== $(1) ($(FUZZ_RUNS) runs)"; \
	$(1) -runs=$(FUZZ_RUNS) -seed=$(FUZZ_SEED) -max_len=65536 -timeout=10 -artifact_prefix=$(BUILD)/fuzz/ \
		$(BUILD)/fuzz/$(2) tests/fuzz/$(2) 2>$(BUILD)/fuzz/last.log \
		|| { tail -40 $(BUILD)/fuzz/last.log; exit 1; }; grep -E '^Done' $(BUILD)/fuzz/last.log | tail -1

fuzz: $(BUILD)/fuzz/fuzz_lpt $(BUILD)/fuzz/fuzz_chrome $(BUILD)/fuzz/fuzz_pftrace
	@$(call FUZZ_RUN,$(BUILD)/fuzz/fuzz_lpt,corpus)
	@$(call FUZZ_RUN,$(BUILD)/fuzz/fuzz_chrome,corpus-json)
	@$(call FUZZ_RUN,$(BUILD)/fuzz/fuzz_pftrace,corpus-pftrace)

# What each command installs (scripts/install-deps): make demo only the build's packages and the
# program it profiles; make test everything its tests run, the Python environment included;
# make bench that and the benchmark tools.
deps:
	@LIBPROF_VENV=$(VENV) scripts/install-deps

demo-deps:
	@scripts/install-deps --demo

bench-deps:
	@LIBPROF_VENV=$(VENV) scripts/install-deps --bench

# The house style is .clang-format's (clang-format 14, Debian 12); test data are not code.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null | grep -v '^tests/fuzz/corpus')
format:
	@clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: the tree follows .clang-format"

# Unit tests first: they pinpoint a broken core faster than a program run under the preload.
# Each suite's output is also kept in $(BUILD)/test-logs, so `make test` can end with one total.
RUN_SUITE = mkdir -p $(BUILD)/test-logs; for t in $(1); do s0=$$(date +%s); \
	$$t --jobs 2 > $(BUILD)/test-logs/$$(basename $$t).log 2>&1; rc=$$?; \
	echo "== $$t ($$(( $$(date +%s) - s0 )) s)"; cat $(BUILD)/test-logs/$$(basename $$t).log; \
	[ $$rc -eq 0 ] || exit $$rc; done

# The integration suites run three at a time on two cores (much of their time is spent waiting
# on the programs they run — CPython's own suites sleep, a followed run lasts 30 s — and two at a
# time left the cores idle a third of the time), the longest first, each one's output printed
# whole when it ends (-O). `make check` is the edit loop's: the unit tests and the suites that take a
# few seconds each (under a minute in all: the slow ones, and ExecuTorch's, are make test's).
# (INTEG_SLOW in the order of their times in make test, longest first: a long one started last
# would be the run's tail)
# (INTEG_LONG: every suite of 20 s or more, longest first — test_stacks and test_perfetto are also
# make check's — so that what starts last is short)
INTEG_SLOW = test_torch test_sample test_coexist test_python test_report test_executorch test_docs test_mpi test_wheel
INTEG_LONG = test_torch test_sample test_coexist test_python test_report test_stacks test_docs test_executorch \
             test_perfetto test_mpi
INTEG_ORDER = $(INTEG_LONG) $(filter-out $(INTEG_LONG),$(patsubst tests/integration/%.c,%,$(INTEGRATION_TESTS)))
CHECK_SUITES = $(filter-out $(INTEG_SLOW),$(INTEG_ORDER))
suite-%:
	@$(call RUN_SUITE,$(BUILD)/tests/$*)

# Everything the tests run, built (make -j2 tests-build: then any one suite can be run by hand).
tests-build: all $(UNIT_BINS) $(INTEG_BINS) $(PROG_BINS)

unit: all $(UNIT_BINS)
	@$(call RUN_SUITE,$(UNIT_BINS))

# Each integration test works in its own /tmp/libprof-test-* directory; they are removed after a
# passing run and kept after a failing one, for inspection.
# (INTEG_EXTRA: more of the same parallel run, started first — make test adds the fuzzers: a
# minute of building and running.)
integration: all $(INTEG_BINS) $(PROG_BINS)
	@$(MAKE) --no-print-directory -j3 -O $(INTEG_EXTRA) $(addprefix suite-,$(INTEG_ORDER))
	@for m in /tmp/libprof-test-*/tiny; do mountpoint -q $$m 2>/dev/null && umount $$m; done; true
	@rm -rf /tmp/libprof-test-*

test: deps
	@rm -rf $(BUILD)/test-logs
	@$(MAKE) --no-print-directory -j2 all $(UNIT_BINS) $(INTEG_BINS) $(PROG_BINS)
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration INTEG_EXTRA=fuzz
	@cat $(BUILD)/test-logs/*.log | sed -n 's/.*Passing: \([0-9]*\) | Failing: \([0-9]*\).*/\1 \2/p' | \
		awk '{p += $$1; f += $$2} END {printf "tests: %d passed, %d failed\n", p, f}'

# The edit loop: format, unit tests and the quick integration suites (make test runs them all).
check: all $(UNIT_BINS) $(INTEG_BINS) $(PROG_BINS)
	@rm -rf $(BUILD)/test-logs
	@$(MAKE) --no-print-directory format-check
	@$(call RUN_SUITE,$(UNIT_BINS))
	@$(MAKE) --no-print-directory -j2 -O $(addprefix suite-,$(CHECK_SUITES))
	@for m in /tmp/libprof-test-*/tiny; do mountpoint -q $$m 2>/dev/null && umount $$m; done; true
	@rm -rf /tmp/libprof-test-*
	@cat $(BUILD)/test-logs/*.log | sed -n 's/.*Passing: \([0-9]*\) | Failing: \([0-9]*\).*/\1 \2/p' | \
		awk '{p += $$1; f += $$2} END {printf "tests: %d passed, %d failed\n", p, f}'

# The wheel: dist/libprof-VERSION-py3-none-manylinux_2_XX_x86_64.whl, the preload, libprof-report,
# the libprof command and the man pages, repaired by the environment's auditwheel; `pip install`
# it anywhere. (scripts/libprof_build.py, also the backend that `pip install .` runs: pyproject.toml)
wheel: all
	@$(VENV)/bin/python3 scripts/libprof_build.py $(BUILD) dist $(VENV)

demo: demo-deps
	@$(MAKE) --no-print-directory all
	@scripts/demo $(BUILD)

bench: bench-deps
	@$(MAKE) --no-print-directory -j2 all $(PROG_BINS)
	@scripts/bench-targets $(BUILD)
	@scripts/bench $(BUILD)
	@scripts/bench-python $(BUILD)
	@LIBPROF_VENV=$(VENV) scripts/bench-gil $(BUILD)
	@scripts/bench-ort $(BUILD)
	@if [ -x $(VENV)/bin/python3 ]; then LIBPROF_VENV=$(VENV) $(VENV)/bin/python3 scripts/bench-peers.py $(BUILD); \
	else echo "## Python profilers: no environment at $(VENV) (scripts/install-deps): skipped"; fi
	@scripts/bench-sample $(BUILD)
	@scripts/bench-torch $(BUILD)
	@LIBPROF_VENV=$(VENV) scripts/bench-stacks $(BUILD)
	@scripts/bench-storm $(BUILD)
	@scripts/bench-pack $(BUILD)
	@scripts/bench-perfetto $(BUILD)
	@scripts/bench-lines $(BUILD)
	@scripts/bench-long $(BUILD)

MANDIR  = $(PREFIX)/share/man
PCDIR   = $(LIBDIR)/pkgconfig

# The man pages of libprof(1), libprof-report(1) and libprof(7), made from the code's tables
# (scripts/gen-man; committed: building needs no generator). libprof(3) is written by hand.
man: all
	scripts/gen-man $(BUILD) docs/man

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCDIR)/libprof $(DESTDIR)$(PCDIR) \
	           $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(BUILD)/libprof.so $(DESTDIR)$(LIBDIR)/libprof.so
	install -m 0755 $(BUILD)/libprof-report $(DESTDIR)$(BINDIR)/libprof-report
	sed 's|^LIBPROF_SO_DEFAULT=.*|LIBPROF_SO_DEFAULT=$(LIBDIR)/libprof.so|' scripts/libprof > $(DESTDIR)$(BINDIR)/libprof
	chmod 0755 $(DESTDIR)$(BINDIR)/libprof
	install -m 0644 include/libprof.h $(DESTDIR)$(INCDIR)/libprof.h
	install -m 0644 include/libprof/format.h $(DESTDIR)$(INCDIR)/libprof/format.h
	install -m 0644 docs/man/libprof.1 docs/man/libprof-report.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 docs/man/libprof.3 $(DESTDIR)$(MANDIR)/man3/libprof.3
	install -m 0644 docs/man/libprof.7 $(DESTDIR)$(MANDIR)/man7/libprof.7
	sed 's|@PREFIX@|$(PREFIX)|' scripts/libprof.pc.in > $(DESTDIR)$(PCDIR)/libprof.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libprof.so $(DESTDIR)$(BINDIR)/libprof-report $(DESTDIR)$(BINDIR)/libprof
	rm -f $(DESTDIR)$(INCDIR)/libprof.h $(DESTDIR)$(INCDIR)/libprof/format.h
	rm -f $(DESTDIR)$(MANDIR)/man1/libprof.1 $(DESTDIR)$(MANDIR)/man1/libprof-report.1 \
	      $(DESTDIR)$(MANDIR)/man3/libprof.3 $(DESTDIR)$(MANDIR)/man7/libprof.7 $(DESTDIR)$(PCDIR)/libprof.pc
	-rmdir $(DESTDIR)$(INCDIR)/libprof 2>/dev/null

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(wildcard $(BUILD)/tests/*.d $(BUILD)/progs/*.d)
