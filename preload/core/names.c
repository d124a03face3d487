/* names.c: interning the names of annotations (ranges, marks, counters), so that a record carries
 * a 32-bit id instead of a string.
 *
 * Lookups take no lock: a slot is published by a release store of its hash after its string and
 * id are in place. Inserting a new name takes a spin lock and writes the name to the spool once
 * (an LP_STR_NAME string chunk). Programs use few distinct names, so the table is fixed: when it
 * or its string arena is full, further new names get id 0, which the trace shows as "(other)". */
#define _GNU_SOURCE
#include <string.h>

#include "names.h"
#include "log.h"
#include "state.h"
#include "tbuf.h"

#define SLOTS 4096                    /* power of two; at most 3/4 used, so ids stay <= LP_MAX_NAME_ID */
#define ARENA_BYTES (2 * 1024 * 1024) /* untouched until used: kernel names are long (C++ templates) */
#define MAX_NAME 2048

struct slot {
    uint64_t hash; /* 0 = empty; published last */
    const char *str;
    uint32_t id, len;
};

static struct slot slots[SLOTS];
static char arena[ARENA_BYTES];
static size_t arena_used;
static uint32_t next_id = 1;
static int insert_lock;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    return h | 1; /* never 0 */
}

static const struct slot *find(const char *s, size_t n, uint64_t h, uint32_t *free_slot) {
    for (uint32_t i = (uint32_t)h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
        uint64_t sh = __atomic_load_n(&slots[i].hash, __ATOMIC_ACQUIRE);
        if (sh == 0) {
            *free_slot = i;
            return NULL;
        }
        if (sh == h && slots[i].len == n && memcmp(slots[i].str, s, n) == 0) return &slots[i];
    }
}

/* The id of `name` (at most MAX_NAME bytes are significant: a CUDA kernel's demangled name runs to
 * hundreds), interning it on first use. */
uint32_t lpr_name_id(const char *name) {
    size_t n = strnlen(name, MAX_NAME);
    uint64_t h = fnv1a(name, n);
    uint32_t fs;
    const struct slot *sl = find(name, n, h, &fs);
    if (LP_LIKELY(sl != NULL)) return sl->id;

    while (__atomic_exchange_n(&insert_lock, 1, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
    uint32_t id = 0;
    sl = find(name, n, h, &fs); /* another thread may have added it meanwhile */
    if (sl) {
        id = sl->id;
    } else if (next_id < SLOTS * 3 / 4 && arena_used + n <= ARENA_BYTES) {
        char *copy = arena + arena_used;
        memcpy(copy, name, n);
        arena_used += n;
        id = next_id++;
        slots[fs].str = copy;
        slots[fs].len = (uint32_t)n;
        slots[fs].id = id;
        uint32_t head[2] = {LP_STR_NAME, id};
        lpr_spool_write(LP_CHUNK_STRING, 0, head, sizeof head, copy, n);
        __atomic_store_n(&slots[fs].hash, h, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&insert_lock, 0, __ATOMIC_RELEASE);
    static int full;
    if (!id && !sl && !__atomic_exchange_n(&full, 1, __ATOMIC_ACQ_REL))
        lpr_warn("the table of names is full (%d names or %d KiB): later names are shown as \"(other)\"", SLOTS * 3 / 4,
                 ARENA_BYTES / 1024);
    return id;
}

/* A forked child writes a new spool: put every known name into it, so that records inherited
 * by code running in the child still resolve. The insert lock may have been held by another
 * thread of the parent at the fork; the child has no such thread, so it is simply released. */
void lpr_names_after_fork_child(void) {
    insert_lock = 0;
    for (uint32_t i = 0; i < SLOTS; i++) {
        if (!slots[i].hash) continue;
        uint32_t head[2] = {LP_STR_NAME, slots[i].id};
        lpr_spool_write(LP_CHUNK_STRING, 0, head, sizeof head, slots[i].str, slots[i].len);
    }
}
