/* html.h: what the HTML page's parts share (html.c draws the page, flame.c its flame graphs,
 * html_cpu.c its CPU views, page.c what they all write alike): escaping, the flame graph's tree. */
#ifndef RP_HTML_H
#define RP_HTML_H

#include <stdint.h>
#include <stdio.h>

/* `s` (at most n bytes) as HTML text or attribute value (page.c). */
void rp_html_esc(FILE *f, const char *s, size_t n);

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

/* The CPU views (html_cpu.c): nothing when the trace has no samples; `r` (may be NULL) adds the
 * CPU flame graph. */
struct lp_slices;
struct lp_reader;
/* `top`: rows per table (--top; 0: 25). */
void rp_html_cpu(FILE *f, const struct lp_slices *c, const struct lp_reader *r, int top);

#endif
