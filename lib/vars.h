/* vars.h: every environment variable the preload reads — the one list that the recorder's loader
 * (preload/core/config.c), `libprof-report --variables` (and so `libprof --variables`) and the
 * documentation test (tests/unit/test_docs.c) all expand, so a variable cannot be read without
 * its help line, nor documented without being read.
 *
 * X(name, argument, default, one line of help, how it is read, field of struct lpr_config,
 *   low bound, high bound (a string's room: 0, sized by the field), the words of a choice).
 * The loader reads them in this order: LIBPROF_VERBOSE and LIBPROF_LOG first, so that the
 * warnings about the others can be verbose and go to the log. */
#ifndef LP_VARS_H
#define LP_VARS_H

// clang-format off
#define LP_VARS(X) \
    X("LIBPROF_VERBOSE", "0|1", "0", \
      "diagnostics on stderr: paths, clock, event counts, the conversion's time", \
      BOOL, verbose, 0, 0, NULL) \
    X("LIBPROF_LOG", "path", "none", \
      "libprof's own messages go to this file (same patterns as LIBPROF_OUTPUT), never to the program's stderr; without it only a line saying libprof cannot work reaches stderr, and what libprof notes while it works is kept in the trace (metadata.libprof.notes)", \
      STRING, log_pat, 0, 0, NULL) \
    X("LIBPROF", "0|1", "unset", \
      "1: profile into ./libprof_profiling/profile_%e_%t_%p.json and .csv, sampling the CPU at 1000 Hz; 0: libprof off whatever else is set", \
      BOOL, master, 0, 0, NULL) \
    X("LIBPROF_OUTPUT", "path", "off", \
      "profile into this trace (patterns %p %h %t %e %r %%; .pftrace: Perfetto's protobuf trace, .lpt: the raw trace, .lpz: the raw trace packed, else Chrome JSON)", \
      STRING, output_pat, 0, 0, NULL) \
    X("LIBPROF_CSV", "path", "with LIBPROF=1 only", \
      "also write the CSV summary there (same patterns)", \
      STRING, csv_pat, 0, 0, NULL) \
    X("LIBPROF_DIR", "dir", "the current directory at start", \
      "relative output paths are resolved against this directory, for the process and all its descendants", \
      STRING, dir, 0, 0, NULL) \
    X("LIBPROF_SUMMARY", "0|1", "0", \
      "print a summary table on stderr at exit, like glibc's memusage", \
      BOOL, summary, 0, 0, NULL) \
    X("LIBPROF_EVENTS", "list", "all", \
      "families to record, comma-separated: all, none, alloc, annot, thread, sync, dl, io, process, wait, blas, dnnl, omp, python, ort, mpi, cpu, torch, net, executorch, cuda, nvtx, cublas, nccl; -name drops one", \
      FAMILIES, families, 0, 0, NULL) \
    X("LIBPROF_STACKS", "n", "0", \
      "record n frames (1-128) of call stack with every allocation", \
      SIZE, stacks, 0, LP_STACK_MAX_DEPTH, NULL) \
    X("LIBPROF_ALLOC_SAMPLE", "bytes", "0", \
      "record only sampled allocations, with their call stacks: one every this many bytes on average (a Poisson process over bytes, K and M allowed); every other allocation and free is counted on its thread, not recorded (calls, bytes, the heap exact); the sites, peaks and leaks by stack are then estimates; implies LIBPROF_STACKS=16 when unset", \
      SIZE, alloc_sample, 0, UINT64_C(1) << 40, NULL) \
    X("LIBPROF_SAMPLE_HZ", "n", "0 (LIBPROF=1: 1000)", \
      "sample every thread's stack n times a second of its own CPU time (1 to 10000; 0: off); Linux 5.13 or later", \
      SIZE, sample_hz, 0, 10000, NULL) \
    X("LIBPROF_SAMPLE_DEPTH", "n", "LIBPROF_STACKS, else 32", \
      "native frames a CPU sample keeps (1-128); the Python frames come on top", \
      SIZE, sample_depth, 0, LP_STACK_MAX_DEPTH, NULL) \
    X("LIBPROF_STACK_CACHE_OFF", "0|1", "0", \
      "1: walk every call stack afresh (the Python frames of a hook's too) instead of reusing validated call chains", \
      BOOL, stack_cache_off, 0, 0, NULL) \
    X("LIBPROF_LINES", "0|1", "1", \
      "0: name native frames by their function alone, not by source file and line and not with the functions inlined there (DWARF through libdw, read by libprof-report, which reads this variable too)", \
      BOOL, lines, 0, 0, NULL) \
    X("LIBPROF_FLAMEGRAPH", "0|1", "0", \
      "with LIBPROF_STACKS: write NAME.alloc.folded, .leaks.folded, .peak.folded and .speedscope.json beside the trace", \
      BOOL, flamegraph, 0, 0, NULL) \
    X("LIBPROF_PYTHON", "0|1", "1", \
      "0: do not read the Python interpreter's frames", \
      BOOL, python, 0, 0, NULL) \
    X("LIBPROF_PYTHON_MALLOC", "0|1", "0", \
      "1: set PYTHONMALLOC=malloc so that small Python objects reach malloc", \
      BOOL, python_malloc, 0, 0, NULL) \
    X("LIBPROF_PY_LINES", "innermost|user", "innermost", \
      "which Python frame the per-line views charge: the innermost, or the innermost in the program's own files (not the standard library's or an installed package's)", \
      CHOICE, py_user_lines, 0, 0, "innermost,user") \
    X("LIBPROF_PYTHON_CALLS", "regex", "none", \
      "Python functions whose qualified name matches (POSIX ERE) become slices", \
      STRING, python_calls, 0, 0, NULL) \
    X("LIBPROF_ORT_NODES", "0|1", "1", \
      "0: do not turn ONNX Runtime's own per-node profiling on", \
      BOOL, ort_nodes, 0, 0, NULL) \
    X("LIBPROF_GPU_TIMES", "0|1", "1", \
      "0: do not load CUPTI for the GPU's own times of kernels, copies and sets (loaded at a program's first CUDA call; a program that starts its own CUPTI client, torch.profiler or Nsight, takes it over)", \
      BOOL, gpu_times, 0, 0, NULL) \
    X("LIBPROF_TORCH_SHAPES", "0|1", "0", \
      "1: each PyTorch operator carries its input shapes (args.shapes), as torch.profiler's record_shapes", \
      BOOL, torch_shapes, 0, 0, NULL) \
    X("LIBPROF_TIMELINE", "seconds", "300", \
      "the Chrome trace keeps the run's last this-many seconds at full detail; before that, slices of LIBPROF_TIMELINE_MIN_NS or more, the others folded into per-thread counters (0: every slice)", \
      SECONDS, timeline_ns, 0, 0, NULL) \
    X("LIBPROF_TIMELINE_MIN_NS", "ns", "10000000", \
      "before the full-detail stretch, slices this long are kept", \
      SIZE, timeline_min_ns, 0, UINT64_C(1000000000000), NULL) \
    X("LIBPROF_MIN_NS", "ns", "0", \
      "calls of the runtime entry points shorter than this are counted, not written one by one", \
      SIZE, min_ns, 0, UINT64_C(1000000000000), NULL) \
    X("LIBPROF_ALLOC_MIN", "bytes", "64K", \
      "allocations this large become instant events in the JSON (K, M, G allowed; 0: every one)", \
      SIZE, alloc_min, 0, UINT64_MAX, NULL) \
    X("LIBPROF_ALLOC_TIMING", "0|1", "0", \
      "1: time every allocation call (two timestamps instead of one)", \
      BOOL, alloc_timing, 0, 0, NULL) \
    X("LIBPROF_START", "running|paused", "running", \
      "paused: start with recording paused", \
      CHOICE, start_paused, 0, 0, "running,paused") \
    X("LIBPROF_DELAY", "seconds", "0", \
      "start recording this long after start-up", \
      SECONDS, delay_ns, 0, 0, NULL) \
    X("LIBPROF_DURATION", "seconds", "unlimited", \
      "stop recording this long after recording started", \
      SECONDS, duration_ns, 0, 0, NULL) \
    X("LIBPROF_SIGNAL", "signal", "none", \
      "each delivery of this signal (e.g. SIGUSR2) pauses or resumes recording", \
      SIGNAL, signal, 0, 0, NULL) \
    X("LIBPROF_SNAPSHOT_SIGNAL", "signal", "none", \
      "each delivery writes a snapshot of the run so far beside the trace, NAME.snapshot-N.json (and .csv with a CSV), made by a libprof-report of its own while the program goes on", \
      SIGNAL, snapshot_signal, 0, 0, NULL) \
    X("LIBPROF_CHILDREN", "0|1", "1", \
      "0: do not profile child processes (libprof leaves their environment)", \
      BOOL, children, 0, 0, NULL) \
    X("LIBPROF_BUFFER_KB", "KiB", "128", \
      "per-thread chunk size, 4 to 262144", \
      SIZE, buffer_kb, 4, 256 * 1024, NULL) \
    X("LIBPROF_KEEP_RAW", "0|1", "0", \
      "1: keep the raw trace beside a JSON trace, packed (NAME.lpz)", \
      BOOL, keep_raw, 0, 0, NULL) \
    X("LIBPROF_FOLLOW", "MiB", "64", \
      "once the raw spool passes this many MiB, a process of libprof's own converts it while the program runs: the disk holds only what is not yet converted, the exit waits only for the last of it (0: convert at exit only)", \
      SIZE, follow_mb, 0, 1024 * 1024, NULL) \
    X("LIBPROF_CONVERT", "exit|background", "exit", \
      "background: the program ends at once and a detached libprof-report converts", \
      CHOICE, convert_background, 0, 0, "exit,background") \
    X("LIBPROF_CLOCK", "tsc|monotonic", "tsc where invariant", \
      "the timestamp source", \
      CHOICE, clock, 0, 0, "monotonic,tsc") \
    X("LIBPROF_FILE_MODE", "octal", "0600", \
      "permissions of the files libprof creates (directories get the matching x bits); 0644 shares traces", \
      MODE, file_mode, 0, 0777, NULL)
// clang-format on

#endif
