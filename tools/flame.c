/* flame.c: the HTML page's flame graphs — a tree of frames from collapsed stacks (allocations)
 * or from CPU samples (then with each frame's samples per slice of the run), drawn as SVG here;
 * the page's script zooms, searches and redraws a bucketed graph for a time window. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "flame.h"

#include "page.h"
#include "lib/fmt.h"
#include "lib/vec.h"

#define MAX_DEPTH 40 /* frames drawn below the root; deeper ones are counted in their ancestors */

struct node {
    const char *name;
    size_t len;
    uint64_t value;
    int first, next, parent;
    uint32_t *b; /* the value per slice of the run (bucketed trees) */
};

struct rp_flame {
    struct node *v;
    int n, depth;
    size_t cap;
    unsigned buckets;
};

struct rp_flame *rp_flame_new(unsigned buckets) {
    struct rp_flame *t = calloc(1, sizeof *t);
    if (!t || LP_RESERVE(t->v, t->cap, 256) != 0) {
        free(t);
        return NULL;
    }
    t->buckets = buckets;
    t->v[0] = (struct node){"all", 3, 0, -1, -1, -1, NULL};
    t->n = 1;
    return t;
}

void rp_flame_free(struct rp_flame *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->v[i].b);
    free(t->v);
    free(t);
}

static int child(struct rp_flame *t, int parent, const char *name, size_t len) {
    for (int k = t->v[parent].first; k >= 0; k = t->v[k].next)
        if (t->v[k].len == len && !memcmp(t->v[k].name, name, len)) return k;
    if (LP_RESERVE(t->v, t->cap, (size_t)t->n + 1) != 0) return -1;
    t->v[t->n] = (struct node){name, len, 0, -1, t->v[parent].first, parent, NULL};
    t->v[parent].first = t->n;
    return t->n++;
}

static int charge(struct rp_flame *t, int k, uint64_t value, unsigned bucket) {
    struct node *nd = &t->v[k];
    nd->value += value;
    if (!t->buckets) return 0;
    if (!nd->b && !(nd->b = calloc(t->buckets, sizeof *nd->b))) return -1;
    nd->b[bucket < t->buckets ? bucket : t->buckets - 1] += (uint32_t)value;
    return 0;
}

int rp_flame_add(struct rp_flame *t, const char *const *names, const size_t *lens, unsigned n, uint64_t value,
                 unsigned bucket) {
    if (charge(t, 0, value, bucket) != 0) return -1;
    int cur = 0;
    for (unsigned i = 0; i < n; i++) {
        if ((cur = child(t, cur, names[i], lens[i])) < 0 || charge(t, cur, value, bucket) != 0) return -1;
    }
    if ((int)n > t->depth) t->depth = (int)n;
    return 0;
}

int rp_flame_add_folded(struct rp_flame *t, const char *folded) {
    for (const char *p = folded; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        const char *sp = nl;
        while (sp > p && sp[-1] != ' ') sp--;
        uint64_t v = strtoull(sp, NULL, 10);
        int cur = 0, d = 0;
        t->v[0].value += v;
        for (const char *s = p; s < sp - 1;) {
            const char *semi = memchr(s, ';', (size_t)(sp - 1 - s));
            const char *e = semi ? semi : sp - 1;
            if ((cur = child(t, cur, s, (size_t)(e - s))) < 0) return -1;
            t->v[cur].value += v;
            d++;
            s = semi ? semi + 1 : sp;
        }
        if (d > t->depth) t->depth = d;
        p = nl + 1;
    }
    return 0;
}

static void value_text(char *buf, size_t len, uint64_t v, uint64_t unit_ns) {
    if (!unit_ns) {
        lp_fmt_bytes(buf, len, v);
        return;
    }
    char t[32];
    lp_fmt_ns(t, sizeof t, (int64_t)(v * unit_ns));
    snprintf(buf, len, "%s, %llu sample%s", t, (unsigned long long)v, v == 1 ? "" : "s");
}

static void node_svg(FILE *f, const struct rp_flame *t, int k, double x, double w, int depth, uint64_t total,
                     uint64_t unit_ns) {
    const struct node *nd = &t->v[k];
    if (w >= 0.5) { /* narrower frames are not drawn (they count in their parents) */
        double y = 20.0 + depth * 18.0;
        unsigned hue = 0;
        for (size_t i = 0; i < nd->len; i++) hue = hue * 31 + (unsigned char)nd->name[i];
        char b[64];
        value_text(b, sizeof b, nd->value, unit_ns);
        fprintf(f, "<g class=\"fr\" data-x=\"%.3f\" data-w=\"%.3f\" data-d=\"%d\" data-v=\"%llu\"", x, w, depth,
                (unsigned long long)nd->value);
        if (t->buckets) { /* its place in the tree and its samples per slice of the run: "slice,n,..." */
            fprintf(f, " data-i=\"%d\" data-p=\"%d\" data-b=\"", k, nd->parent);
            int first = 1;
            for (unsigned i = 0; nd->b && i < t->buckets; i++)
                if (nd->b[i]) {
                    fprintf(f, first ? "%u,%u" : ",%u,%u", i, nd->b[i]);
                    first = 0;
                }
            fputc('"', f);
        }
        fputs(" data-n=\"", f);
        rp_html_esc(f, nd->name, nd->len);
        fputs("\"><title>", f);
        rp_html_esc(f, nd->name, nd->len);
        fprintf(f,
                " — %s (%.1f%%)</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"17\" "
                "fill=\"hsl(%u,70%%,%u%%)\"/>",
                b, 100.0 * (double)nd->value / (double)total, x, y, w, 10 + hue % 40, 55 + hue % 20);
        size_t fit = w > 40 ? (size_t)(w / 6.5) : 0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", x + 3, y + 13);
        rp_html_esc(f, nd->name, nd->len < fit ? nd->len : fit);
        fputs("</text></g>\n", f);
    }
    if (depth >= MAX_DEPTH) return;
    double cx = x;
    for (int c = nd->first; c >= 0; c = t->v[c].next) {
        double cw = nd->value ? w * (double)t->v[c].value / (double)nd->value : 0;
        node_svg(f, t, c, cx, cw, depth + 1, total, unit_ns);
        cx += cw;
    }
}

void rp_flame_svg(FILE *f, const struct rp_flame *t, const char *id, const char *title, const char *what,
                  uint64_t unit_ns) {
    if (!t || !t->v[0].value) return;
    int depth = t->depth > MAX_DEPTH ? MAX_DEPTH : t->depth;
    char b[64];
    value_text(b, sizeof b, t->v[0].value, unit_ns);
    fprintf(f,
            "<h2>%s</h2><p>flame graph, root at the top; width = %s (%s in all); hover a frame for its share, "
            "click to zoom into it (click the root to zoom out), search to highlight%s</p>\n"
            "<div class=\"flame\" id=\"%s\" data-nb=\"%u\"><input class=\"search\" placeholder=\"search (regex)\"> "
            "<span class=\"matched\"></span><br>"
            "<svg width=\"1000\" height=\"%d\" viewBox=\"0 0 1000 %d\" role=\"img\" aria-label=\"%s\" "
            "font-family=monospace>\n",
            title, what, b, t->buckets ? "; the time window redraws it" : "", id, t->buckets, 40 + depth * 18,
            40 + depth * 18, title);
    node_svg(f, t, 0, 0, 1000, 0, t->v[0].value, unit_ns);
    fputs("</svg></div>\n", f);
}

/* A click zooms into a frame (its ancestors span the width, frames outside its subtree are
 * hidden; the root zooms out); the search box highlights the frames whose name matches and says
 * their share; rpFlameWindow sums each frame of a bucketed graph over the window's slices and
 * lays the frames out again, children left to right as drawn. Then the tables' sorting. */
const char rp_flame_js[] =
    "<script>\n"
    "function fit(g,x,w){var r=g.querySelector('rect'),t=g.querySelector('text'),n=g.dataset.n;"
    "r.setAttribute('x',x);r.setAttribute('width',Math.max(w,0));t.setAttribute('x',x+3);"
    "var k=w>40?Math.floor(w/6.5):0;t.textContent=n.length>k?n.slice(0,k):n;}\n"
    "function zoom(div,z){var zx=+z.dataset.x,zw=+z.dataset.w,zd=+z.dataset.d;"
    "div.querySelectorAll('g.fr').forEach(function(g){var x=+g.dataset.x,w=+g.dataset.w,d=+g.dataset.d;"
    "if(g.dataset.off){g.style.display='none';return;}"
    "if(d>=zd&&x>=zx-1e-6&&x+w<=zx+zw+1e-6){g.style.display='';fit(g,(x-zx)*1000/zw,w*1000/zw);}"
    "else if(d<zd&&x<=zx+1e-6&&x+w>=zx+zw-1e-6){g.style.display='';fit(g,0,1000);}"
    "else g.style.display='none';});div.dataset.zoom=z.dataset.n;}\n"
    "function rpFlameWindow(lo,hi,of){document.querySelectorAll('div.flame').forEach(function(div){"
    "var nb=+div.dataset.nb;if(!nb)return;var a=Math.floor(lo*nb/of),z=Math.max(a+1,Math.ceil(hi*nb/of));"
    "var kids={},root=null,all=0;div.querySelectorAll('g.fr').forEach(function(g){var b=g.dataset.b.split(','),v=0;"
    "for(var i=0;i+1<b.length;i+=2)if(+b[i]>=a&&+b[i]<z)v+=+b[i+1];g.dataset.v=v;"
    "if(g.dataset.p==='-1'){root=g;all=v;}else(kids[g.dataset.p]=kids[g.dataset.p]||[]).push(g);});"
    "function place(g,x,w){g.dataset.x=x;g.dataset.w=w;var off=w<0.5;if(off)g.dataset.off=1;else delete g.dataset.off;"
    "g.style.display=off?'none':'';if(!off)fit(g,x,w);var t=g.querySelector('title');"
    "t.textContent=g.dataset.n+' — '+g.dataset.v+' samples ('+(all?100*g.dataset.v/all:0).toFixed(1)+'%)';"
    "var cx=x;(kids[g.dataset.i]||[]).forEach(function(c){var cw=+g.dataset.v?w*c.dataset.v/g.dataset.v:0;"
    "place(c,cx,cw);cx+=cw;});}if(root)place(root,0,all?1000:0);});}\n"
    "document.querySelectorAll('div.flame').forEach(function(div){"
    "div.querySelectorAll('g.fr').forEach(function(g){g.style.cursor='pointer';"
    "g.addEventListener('click',function(){zoom(div,g);});});"
    "var s=div.querySelector('input.search'),m=div.querySelector('.matched');"
    "s.addEventListener('input',function(){var re;try{re=new RegExp(s.value);}catch(e){return;}"
    "var tot=0,all=+div.querySelector('g.fr[data-d=\"0\"]').dataset.v,hit=0;"
    "div.querySelectorAll('g.fr').forEach(function(g){var r=g.querySelector('rect');"
    "if(!r.dataset.fill)r.dataset.fill=r.getAttribute('fill');"
    "var on=s.value&&re.test(g.dataset.n);r.setAttribute('fill',on?'#e040fb':r.dataset.fill);"
    "if(on){hit++;var a=g.parentNode.querySelectorAll('g.fr'),top=true;"
    "a.forEach(function(h){if(h!==g&&+h.dataset.d<+g.dataset.d&&re.test(h.dataset.n)&&"
    "+h.dataset.x<=+g.dataset.x&&+h.dataset.x+ +h.dataset.w>=+g.dataset.x+ +g.dataset.w)top=false;});"
    "if(top)tot+=+g.dataset.v;}});div.dataset.matches=hit;"
    "m.textContent=s.value?hit+' frames, '+(100*tot/all).toFixed(1)+'% of the total':'';});});\n"
    "document.querySelectorAll('table.sortable th').forEach(function(th,i){th.style.cursor='pointer';"
    "th.addEventListener('click',function(){var tb=th.closest('table'),rows=[].slice.call(tb.rows,1);"
    "var dir=th.dataset.dir==='d'?1:-1;th.dataset.dir=dir<0?'d':'a';"
    "rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,"
    "y=b.cells[i].dataset.v||b.cells[i].textContent,nx=parseFloat(x),ny=parseFloat(y);"
    "return (isNaN(nx)||isNaN(ny)?x.localeCompare(y):nx-ny)*dir;});"
    "rows.forEach(function(r){tb.appendChild(r);});});});\n"
    "</script>\n";
