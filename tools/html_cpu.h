/* html_cpu.h: the HTML page's CPU views (html_cpu.c), a section of the page html.c draws. */
#ifndef RP_HTML_CPU_H
#define RP_HTML_CPU_H

#include <stdio.h>

/* The CPU views: nothing when the trace has no samples; `r` (may be NULL) adds the CPU flame
 * graph, drawn from `samples` (the samples the trace's conversion gathered, or NULL: a pass of its
 * own gathers them). */
struct lp_slices;
struct lp_reader;
struct lp_samples;
/* `top`: rows per table (--top; 0: 25). */
void rp_html_cpu(FILE *f, const struct lp_slices *c, const struct lp_reader *r, struct lp_samples *samples, int top);

#endif
