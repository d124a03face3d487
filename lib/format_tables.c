/* format_tables.c: the tables of the raw trace format (include/libprof/format.h) — names, families,
 * shapes and payload sizes of every record kind and entry point, generated from the format's
 * X-macro lists — and the one place a file header's identity is written. Shared by the recorder
 * (which writes headers and reads the family table for LIBPROF_EVENTS) and every reader. */
#include <string.h>

#include "libprof/format.h"

_Static_assert(sizeof(struct lp_file_header) == LP_FILE_HEADER_SIZE, "file header layout");
_Static_assert(sizeof(struct lp_chunk_header) == LP_CHUNK_HEADER_SIZE, "chunk header layout");
_Static_assert(sizeof(struct lp_end) % 8 == 0, "end record layout");

const char *const lp_own_part_names[LP_OWN_PARTS] = {"buffers", "stacks", "walker", "python",
                                                     "blocks",  "static", "other"};

const char *const lp_kind_names[LP_KIND_COUNT] = {"none",
#define LP_X(id, name, fam, shape, words) name,
                                                  LP_KINDS(LP_X)
#undef LP_X
};
const uint8_t lp_kind_family[LP_KIND_COUNT] = {0,
#define LP_X(id, name, fam, shape, words) LP_FAM_##fam,
                                               LP_KINDS(LP_X)
#undef LP_X
};
const uint8_t lp_kind_shape[LP_KIND_COUNT] = {0,
#define LP_X(id, name, fam, shape, words) shape,
                                              LP_KINDS(LP_X)
#undef LP_X
};
const uint8_t lp_kind_words[LP_KIND_COUNT] = {0,
#define LP_X(id, name, fam, shape, words) words,
                                              LP_KINDS(LP_X)
#undef LP_X
};
/* Records whose length is all a reader must check: not calls and tallies (their length is in
 * the record), resets (the reader notes them), stack words (they must precede a record). */
#define LP_PLAIN(id, shape) \
    ((shape) != LP_SHAPE_CALL && (shape) != LP_SHAPE_TALLY && (shape) != LP_SHAPE_STACKREF && LP_EV_##id != LP_EV_RESET)
const uint8_t lp_plain_words[256] = {
#define LP_X(id, name, fam, shape, words)                 \
    [LP_EV_##id] = LP_PLAIN(id, shape) ? 1 + (words) : 0, \
    [LP_EV_##id | LP_REC_TIMED] = LP_PLAIN(id, shape) ? 2 + (words) : 0,
    LP_KINDS(LP_X)
#undef LP_X
};
const char *const lp_call_names[LP_CALL_COUNT] = {"none",
#define LP_X(id, name, fam, role, args) name,
                                                  LP_CALLS(LP_X)
#undef LP_X
};
const uint8_t lp_call_family[LP_CALL_COUNT] = {0,
#define LP_X(id, name, fam, role, args) LP_FAM_##fam,
                                               LP_CALLS(LP_X)
#undef LP_X
};
const uint8_t lp_call_role[LP_CALL_COUNT] = {0,
#define LP_X(id, name, fam, role, args) LP_ROLE_##role,
                                             LP_CALLS(LP_X)
#undef LP_X
};
const char *const lp_call_args[LP_CALL_COUNT] = {"",
#define LP_X(id, name, fam, role, args) args,
                                                 LP_CALLS(LP_X)
#undef LP_X
};
const char *const lp_family_names[LP_FAM_COUNT] = {
#define LP_X(id, name, kernel) name,
    LP_FAMILIES(LP_X)
#undef LP_X
};
const uint8_t lp_family_kernel[LP_FAM_COUNT] = {
#define LP_X(id, name, kernel) kernel,
    LP_FAMILIES(LP_X)
#undef LP_X
};

int lp_family_find(const char *name, size_t len) {
    for (int f = 0; f < LP_FAM_COUNT; f++)
        if (strlen(lp_family_names[f]) == len && !strncmp(lp_family_names[f], name, len)) return f;
    return -1;
}

void lp_header_init(struct lp_file_header *h, uint32_t clock) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, LP_FORMAT_MAGIC, 8);
    h->version = LP_FORMAT_VERSION;
    h->byte_order = LP_BYTE_ORDER_MARK;
    h->header_size = LP_FILE_HEADER_SIZE;
    h->clock = clock;
}
