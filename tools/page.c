/* page.c: what every part of the HTML page (html.c, flame.c, html_cpu.c) writes the same way. */
#include <stdio.h>

#include "page.h"

void rp_html_esc(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '<')
            fputs("&lt;", f);
        else if (ch == '>')
            fputs("&gt;", f);
        else if (ch == '&')
            fputs("&amp;", f);
        else if (ch == '"')
            fputs("&quot;", f);
        else if (ch < 0x20 && ch != '\n' && ch != '\t')
            fputc(' ', f);
        else
            fputc(ch, f);
    }
}
