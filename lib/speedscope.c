/* speedscope.c: see speedscope.h. Two passes: every frame the views name goes into the shared
 * table (the file lists the frames before the profiles that index them), then each view writes
 * its profiles with the frames' indices. */
#include "speedscope.h"

#include <string.h>

#include "json.h"
#include "map.h"
#include "os.h"
#include "samples.h"
#include "sites.h"
#include "vec.h"

#define SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct frames {
    struct lp_map ix;   /* name pointer -> 1 + index */
    struct lp_map text; /* hash of the name's text -> 1 + index (the first name with that hash) */
    const char **name;
    size_t n, cap;
    int oom;
};

static uint64_t frame(void *arg, const char *name) {
    struct frames *f = arg;
    uint64_t v;
    if (lp_map_get(&f->ix, (uint64_t)(uintptr_t)name, &v)) return v - 1;
    /* names are interned by each view's symboliser; the same name from two views (a fixed one
     * such as "[unknown stack]", or two symbolisers) gets one index by its text */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h |= 1;
    size_t at = f->n;
    if (lp_map_get(&f->text, h, &v) && !strcmp(f->name[v - 1], name))
        at = v - 1;
    else if (lp_map_get(&f->text, h, &v)) /* another name, same hash: look for it */
        for (size_t i = 0; i < f->n && at == f->n; i++)
            if (!strcmp(f->name[i], name)) at = i;
    if (at == f->n) {
        if (LP_RESERVE(f->name, f->cap, f->n + 1) != 0) {
            f->oom = 1;
            return 0;
        }
        f->name[f->n++] = name;
        if (!lp_map_get(&f->text, h, &v) && lp_map_put(&f->text, h, at + 1, NULL) < 0) f->oom = 1;
    }
    if (lp_map_put(&f->ix, (uint64_t)(uintptr_t)name, at + 1, NULL) < 0) f->oom = 1;
    return at;
}

int lp_speedscope(struct lp_out *o, const char *name, struct lp_sites *sites, const struct lp_samples *samples) {
    struct frames f = {0};
    lp_sites_speedscope_frames(sites, frame, &f);
    lp_samples_speedscope_frames(samples, frame, &f);
    struct lp_json j = {.o = o};
    lp_json_value_begin(&j);
    lp_json_object(&j);
    lp_json_ks(&j, "$schema", SCHEMA, sizeof SCHEMA - 1);
    lp_json_ks(&j, "exporter", "libprof", 7);
    lp_json_ks(&j, "name", name, strlen(name));
    lp_json_ku(&j, "activeProfileIndex", 0);
    lp_json_kobject(&j, "shared");
    lp_json_karray(&j, "frames");
    for (size_t i = 0; i < f.n; i++) {
        lp_json_object(&j);
        lp_json_ks(&j, "name", f.name[i], strlen(f.name[i]));
        lp_json_object_end(&j);
    }
    lp_json_array_end(&j);
    lp_json_object_end(&j);
    lp_json_karray(&j, "profiles");
    lp_sites_speedscope_profiles(sites, frame, &f, &j);
    lp_samples_speedscope_profiles(samples, frame, &f, &j);
    lp_json_array_end(&j);
    lp_json_object_end(&j);
    lp_out_c(o, '\n');
    lp_map_free(&f.ix);
    lp_map_free(&f.text);
    lp_os_free(f.name);
    return f.oom ? -1 : 0;
}
