/* libprof raw trace format (.lpt): the one definition shared by the preload and the tools.
 *
 * A raw trace is a fixed file header followed by a sequence of chunks. Every chunk starts with a
 * 32-byte chunk header, so a reader can walk the file without understanding every chunk type,
 * and a file cut short (process killed, disk full) still decodes up to its last whole chunk.
 * A clean run ends with an END chunk; its absence is how a reader knows the trace was cut short.
 *
 * Threads write EVENTS chunks independently (one pwrite each, at offsets reserved with an atomic
 * add), so chunks of different threads interleave in the file; within one thread they are in
 * order. Events inside a chunk are packed records of 64-bit words:
 *
 *   word 0   (kind | LP_REC_TIMED?) << 56 | time in clock ticks since the file's origin (56 bits)
 *   word 1   only when LP_REC_TIMED: duration in ticks (low 48 bits) | aux (high 16 bits, 0 today)
 *   then     payload, lp_kind_words[kind] words (see the X-macro list below)
 *
 * A timed record's time is the call's start. An untimed record carries one timestamp, taken when
 * the call took effect: after an allocation returned, before a release began. Allocation calls
 * are untimed unless LIBPROF_ALLOC_TIMING=1 (one timestamp costs ~8 ns on a virtual machine's
 * TSC, a large share of a malloc); realloc is always timed because it releases at its start and
 * allocates at its end.
 *
 * Ticks are converted to nanoseconds with the (ticks, CLOCK_MONOTONIC ns) pairs stored in the
 * file header and in every chunk header: the decoder fits a line through the first and last pair.
 * With LP_CLOCK_MONOTONIC a tick is a nanosecond.
 *
 * All integers are little-endian host order; the header's byte_order field lets a reader on
 * another machine refuse the file rather than misread it.
 *
 * Update LP_FORMAT_VERSION on every change to this file's layouts or kind numbering. */
#ifndef LIBPROF_FORMAT_H
#define LIBPROF_FORMAT_H

#include <stdint.h>

#define LIBPROF_VERSION "0.1.0"         /* the release, shown in traces and --version */
#define LP_FORMAT_MAGIC "LIBPROF\x1a"  /* 8 bytes; \x1a stops `type` from dumping the file */
#define LP_FORMAT_VERSION 5
#define LP_BYTE_ORDER_MARK 0x01020304u
#define LP_CHUNK_MAGIC 0x4b43504cu      /* "LPCK" read as little-endian */

/* Event families, selectable with LIBPROF_EVENTS. Later families (thread, io, blas, ...) are
 * appended here; the bit is the family's index. */
#define LP_FAMILIES(X) \
    X(ALLOC, "alloc") \
    X(ANNOT, "annot") \
    X(CONTROL, "control") /* pause/resume/reset: always recorded, whatever LIBPROF_EVENTS says */

enum lp_family {
#define LP_X(id, name) LP_FAM_##id,
    LP_FAMILIES(LP_X)
#undef LP_X
    LP_FAM_COUNT
};

/* How a kind's payload words are to be read. */
enum lp_shape {
    LP_SHAPE_ALLOC,   /* size, ptr            : a block of `size` bytes now lives at ptr (0 = failed) */
    LP_SHAPE_FREE,    /* ptr                  : ptr released (0 = free(NULL)) */
    LP_SHAPE_REALLOC, /* size, ptr, old ptr   : old released (unless ptr==0 && size>0), ptr now lives */
    LP_SHAPE_RANGE,   /* name id (timed)      : a named block of the program, pushed and popped */
    LP_SHAPE_MARK,    /* name id              : a named instant */
    LP_SHAPE_COUNTER, /* name id, value       : a named counter took `value` (IEEE double bits) */
    LP_SHAPE_CONTROL, /* reason (enum lp_control_reason): recording paused, resumed or reset */
};

enum lp_control_reason {
    LP_CTL_API = 1,     /* libprof_start/stop/reset called by the program */
    LP_CTL_SIGNAL = 2,  /* LIBPROF_SIGNAL delivered */
    LP_CTL_DELAY = 3,   /* LIBPROF_DELAY elapsed, or the start of a delayed run */
    LP_CTL_DURATION = 4,/* LIBPROF_DURATION elapsed */
    LP_CTL_START = 5,   /* LIBPROF_START=paused */
};

/* Every record kind: id, name as shown to users, family, shape, payload words.
 * The numeric value of a kind is its position in this list, starting at 1 (0 is never valid,
 * so a zeroed hole in a damaged file cannot be mistaken for an event). */
#define LP_KINDS(X) \
    X(MALLOC,         "malloc",         ALLOC, LP_SHAPE_ALLOC,   2) \
    X(CALLOC,         "calloc",         ALLOC, LP_SHAPE_ALLOC,   2) \
    X(REALLOC,        "realloc",        ALLOC, LP_SHAPE_REALLOC, 3) \
    X(REALLOCARRAY,   "reallocarray",   ALLOC, LP_SHAPE_REALLOC, 3) \
    X(FREE,           "free",           ALLOC, LP_SHAPE_FREE,    1) \
    X(POSIX_MEMALIGN, "posix_memalign", ALLOC, LP_SHAPE_ALLOC,   2) \
    X(ALIGNED_ALLOC,  "aligned_alloc",  ALLOC, LP_SHAPE_ALLOC,   2) \
    X(MEMALIGN,       "memalign",       ALLOC, LP_SHAPE_ALLOC,   2) \
    X(VALLOC,         "valloc",         ALLOC, LP_SHAPE_ALLOC,   2) \
    X(PVALLOC,        "pvalloc",        ALLOC, LP_SHAPE_ALLOC,   2) \
    X(RANGE,          "range",          ANNOT, LP_SHAPE_RANGE,   1) \
    X(MARK,           "mark",           ANNOT, LP_SHAPE_MARK,    1) \
    X(COUNTER,        "counter",        ANNOT, LP_SHAPE_COUNTER, 2) \
    X(PAUSE,          "libprof paused", CONTROL, LP_SHAPE_CONTROL, 1) \
    X(RESUME,         "libprof resumed", CONTROL, LP_SHAPE_CONTROL, 1) \
    X(RESET,          "libprof reset",  CONTROL, LP_SHAPE_CONTROL, 1)

enum lp_kind {
    LP_KIND_NONE = 0,
#define LP_X(id, name, fam, shape, words) LP_EV_##id,
    LP_KINDS(LP_X)
#undef LP_X
    LP_KIND_COUNT
};

#define LP_REC_TIMED 0x80u /* in the kind byte: a duration word follows word 0 */
#define LP_TS_BITS 56
#define LP_TS_MASK ((UINT64_C(1) << LP_TS_BITS) - 1)
#define LP_DUR_MASK ((UINT64_C(1) << 48) - 1)

/* Clock the ticks come from. */
enum lp_clock {
    LP_CLOCK_MONOTONIC = 0, /* clock_gettime(CLOCK_MONOTONIC), tick = 1 ns */
    LP_CLOCK_TSC = 1,       /* x86 invariant TSC, converted with the sync pairs */
};

/* The file header: exactly LP_FILE_HEADER_SIZE bytes at offset 0. */
#define LP_FILE_HEADER_SIZE 128
struct lp_file_header {
    char magic[8];             /* LP_FORMAT_MAGIC */
    uint32_t version;          /* LP_FORMAT_VERSION */
    uint32_t byte_order;       /* LP_BYTE_ORDER_MARK as written by the producer */
    uint32_t header_size;      /* LP_FILE_HEADER_SIZE */
    uint32_t clock;            /* enum lp_clock */
    uint32_t pid, ppid;
    uint64_t origin_ticks;     /* tick value that record timestamps are relative to */
    uint64_t origin_mono_ns;   /* CLOCK_MONOTONIC at origin */
    uint64_t origin_real_ns;   /* CLOCK_REALTIME at origin: aligns traces of several processes */
    uint32_t families;         /* bit mask of enum lp_family recorded */
    uint32_t buffer_bytes;     /* per-thread chunk size used */
    uint64_t alloc_min;        /* LIBPROF_ALLOC_MIN in effect (for the Chrome export) */
    uint8_t reserved[128 - 72];
};

/* Chunk types. */
enum lp_chunk_type {
    LP_CHUNK_EVENTS = 1, /* packed records of thread `tid` */
    LP_CHUNK_STRING = 2, /* u32 key (enum lp_string_key), then the bytes; `tid` for thread names */
    LP_CHUNK_END = 3,    /* struct lp_end: the run finished and everything was flushed */
};

enum lp_string_key {
    LP_STR_HOSTNAME = 1,
    LP_STR_EXE = 2,         /* absolute path of the executable */
    LP_STR_CMDLINE = 3,     /* argv, each argument NUL-terminated */
    LP_STR_THREAD_NAME = 4, /* name of thread `tid` */
    LP_STR_NAME = 5,        /* u32 id, then the bytes: a name that annotation records refer to */
};

/* Annotation name ids are dense from 1; a reader may treat a larger id as damage. */
#define LP_MAX_NAME_ID 65535

#define LP_CHUNK_HEADER_SIZE 32
struct lp_chunk_header {
    uint32_t magic;       /* LP_CHUNK_MAGIC */
    uint16_t type;        /* enum lp_chunk_type */
    uint16_t flags;       /* 0 */
    uint32_t tid;         /* kernel thread id of the writer (or subject, for thread names) */
    uint32_t length;      /* payload bytes after this header */
    uint64_t sync_ticks;  /* clock ticks when the chunk was written ... */
    uint64_t sync_mono_ns;/* ... and CLOCK_MONOTONIC at the same moment */
};

struct lp_end {
    uint64_t end_ticks;       /* relative to origin */
    uint64_t events_written;
    uint64_t events_dropped;  /* lost to write errors; the trace says so rather than hiding it */
    uint64_t chunks_written;
    int32_t exit_status;      /* status given to exit/_exit; -1 = unknown (returned from main) */
    uint32_t signal;          /* the signal that ended the process, 0 if none */
};

/* Name, family and payload-word tables, indexed by kind (defined once in tools/lpt.c). */
extern const char *const lp_kind_names[LP_KIND_COUNT];
extern const uint8_t lp_kind_family[LP_KIND_COUNT];
extern const uint8_t lp_kind_shape[LP_KIND_COUNT];
extern const uint8_t lp_kind_words[LP_KIND_COUNT];
extern const char *const lp_family_names[LP_FAM_COUNT];

/* The kind of record `w0`, or 0 if the kind byte is not valid. */
static inline unsigned lp_rec_kind(uint64_t w0) {
    unsigned k = (unsigned)(w0 >> LP_TS_BITS) & ~LP_REC_TIMED;
    return k < LP_KIND_COUNT ? k : 0;
}
static inline unsigned lp_rec_timed(uint64_t w0) { return (unsigned)(w0 >> (LP_TS_BITS + 7)) & 1; }
/* Words in the record that starts with `w0` (kind must be valid). */
static inline unsigned lp_rec_words(uint64_t w0) {
    return 1 + lp_rec_timed(w0) + lp_kind_words[lp_rec_kind(w0)];
}

#endif
