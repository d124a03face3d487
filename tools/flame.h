/* flame.h: the HTML page's flame graphs (flame.c), drawn by html.c and html_cpu.c. */
#ifndef RP_FLAME_H
#define RP_FLAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A flame graph: frames merged from the root down, each with its value; with `buckets`, each
 * frame also keeps its value per slice of the run, so that the page can redraw the graph for a
 * time window. Frame names are kept by pointer: they must outlive the tree. */
struct rp_flame;
struct rp_flame *rp_flame_new(unsigned buckets);
void rp_flame_free(struct rp_flame *t);
/* One stack, root first (n names of the given lengths), adding `value` (in slice `bucket`). 0 or -1. */
int rp_flame_add(struct rp_flame *t, const char *const *names, const size_t *lens, unsigned n, uint64_t value,
                 unsigned bucket);
/* Collapsed stacks ("root;...;leaf N" lines); the text must outlive the tree. 0 or -1. */
int rp_flame_add_folded(struct rp_flame *t, const char *folded);
/* The graph as a section of the page: a heading, a line of help, the SVG. `unit_ns` 0: values
 * are bytes; else samples of that many nanoseconds each. Nothing when the tree is empty. */
void rp_flame_svg(FILE *f, const struct rp_flame *t, const char *id, const char *title, const char *what,
                  uint64_t unit_ns);
/* The page's script for every flame graph (zoom, search; a time window for bucketed ones:
 * rpFlameWindow(lo, hi, of) redraws them for slices [lo, hi) of `of`) and the tables' sorting. */
extern const char rp_flame_js[];

#endif
