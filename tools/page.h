/* page.h: what every part of the HTML page (html.c draws the page, flame.c its flame graphs,
 * html_cpu.c its CPU views) writes the same way (page.c). */
#ifndef RP_PAGE_H
#define RP_PAGE_H

#include <stddef.h>
#include <stdio.h>

/* `s` (at most n bytes) as HTML text or attribute value. */
void rp_html_esc(FILE *f, const char *s, size_t n);

#endif
