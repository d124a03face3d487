/* python_lines.c: a frame's line from its code's line table (3.11+'s location table,
 * Objects/locations.md) — each table decoded once into ranges and searched, where CPython's
 * PyCode_Addr2Line reads the table from its start at every call; before 3.11, and when a table
 * cannot be kept, CPython's own. */
#define _GNU_SOURCE
#include <string.h>

#include "python_int.h"

static uint32_t lines_used;

/* A varint of the location table at p[*i] (6 bits a byte, 0x40: more), its sign in the low bit
 * where `sign`. */
static int lt_varint(const uint8_t *p, size_t *i, size_t n, int sign) {
    unsigned v = 0, shift = 0, b;
    do {
        b = *i < n ? p[(*i)++] : 0;
        if (shift < 30) v |= (b & 63) << shift;
        shift += 6;
    } while (b & 64);
    return !sign ? (int)v : v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The ranges of location table `p` (n bytes; 3.11+, Objects/locations.md) of a code whose first
 * line is `line`, into out (at most `cap`; NULL: counted): each where the line changes, its start
 * in code units << 32 | its line (-1: none), and one at the end with none. Their number, or 0
 * when the table is not one. Each entry is a byte 1cccclll (code c, 1 + l code units) and its
 * own bytes (top bit clear): 15 no line, 13 and 14 a signed varint delta first, 10-12 a delta of
 * c - 10, 0-9 the same line. */
static uint32_t lt_ranges(const uint8_t *p, size_t n, int line, uint64_t *out, uint32_t cap) {
    uint32_t k = 0, addr = 0;
    int64_t cur = INT64_MIN;
    for (size_t i = 0; i < n;) {
        unsigned b = p[i++], kind = (b >> 3) & 15;
        if (!(b & 128)) return 0;
        int l = -1;
        if (kind != 15) {
            line += kind == 13 || kind == 14 ? lt_varint(p, &i, n, 1) : kind >= 10 ? (int)kind - 10 : 0;
            l = line;
        }
        while (i < n && !(p[i] & 128)) i++; /* the rest of it: columns, end line */
        if (l != cur) {
            if (out && k < cap) out[k] = (uint64_t)addr << 32 | (uint32_t)l;
            k++;
            cur = l;
        }
        addr += (b & 7) + 1;
    }
    if (out && k < cap) out[k] = (uint64_t)addr << 32 | UINT32_MAX;
    return k + 1;
}

/* Code `code`'s (entry `id`'s) line table, at `lt`, decoded once into `lines`: its ranges, their
 * number in *n (NULL where it cannot be: the room used up, a table that is not one). An entry
 * stands for every code object of its name, file and first line made at its address — such as
 * the __init__ each dataclass has exec make, whose tables differ — so the table's bytes are kept
 * with its ranges (`lines`: its size, its bytes, its ranges) and compared: another table is
 * decoded afresh. */
static const uint64_t *line_table(uintptr_t code, uint32_t id, uintptr_t lt, uint32_t *n) {
    struct pyent *e = &ents[id];
    const uint8_t *p = (const uint8_t *)(lt + (uintptr_t)L->bytes_data);
    uintptr_t size = lt && !(lt & 7) && rd(lt + 8) == py_bytes_type ? rd(lt + 16) : 0;
    if (!size || size >= (1u << 20)) return NULL;
    uint32_t words = (uint32_t)((size + 7) / 8);
    uint64_t t = __atomic_load_n(&e->table, __ATOMIC_ACQUIRE);
    if (LP_LIKELY(t != 0)) {
        const uint64_t *h = lines + (t >> 32) - 1;
        if (h[0] == size && !memcmp(h + 1, p, size)) {
            *n = (uint32_t)t;
            return h + 1 + words;
        }
    }
    int32_t first = *(const int32_t *)(code + (uintptr_t)L->co_firstlineno);
    /* decoded in one pass where it goes: room for as many ranges as the table has bytes (each
     * entry takes one at least) and the end, what is not used handed back unless another
     * table was placed after it meanwhile */
    const uint32_t most = (uint32_t)size + 1, room = 1 + words + most;
    uint32_t at = __atomic_fetch_add(&lines_used, room, __ATOMIC_RELAXED);
    if (at + room > LINE_WORDS) return NULL;
    lpr_ahead(&lines_ahead, lines, (size_t)(at + room) * 8, LINE_WORDS * 8ull);
    uint64_t *h = lines + at;
    uint32_t k = lt_ranges(p, size, first, h + 1 + words, most);
    uint32_t end = at + room;
    __atomic_compare_exchange_n(&lines_used, &end, at + 1 + words + k, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    if (!k) return NULL;
    h[0] = size;
    h[words] = 0; /* (the last word's bytes past the table: compared by no one, but set) */
    memcpy(h + 1, p, size);
    /* (two threads may decode it at once: each its own copy, the last one kept) */
    __atomic_store_n(&e->table, (uint64_t)(at + 1) << 32 | k, __ATOMIC_RELEASE);
    *n = k;
    return h + 1 + words;
}

/* The line of code `code` (entry `id`, line table `lt`) at byte offset `addr`, as
 * PyCode_Addr2Line gives it: from its decoded table where there is one (a binary search;
 * CPython's reads the table from its start at every call). */
int lpr_py_addr2line(uintptr_t code, uint32_t id, uintptr_t lt, int addr) {
    uint32_t n;
    const uint64_t *r = lines ? line_table(code, id, lt, &n) : NULL;
    if (!r) return py_addr2line((void *)code, addr);
    if (addr < 0) return *(const int32_t *)(code + (uintptr_t)L->co_firstlineno);
    uint64_t key = (uint64_t)(unsigned)(addr / 2) << 32 | UINT32_MAX;
    uint32_t lo = 0, hi = n; /* the last range starting at or before it */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (r[mid] <= key)
            lo = mid;
        else
            hi = mid;
    }
    return r[lo] <= key ? (int32_t)(uint32_t)r[lo] : -1;
}
