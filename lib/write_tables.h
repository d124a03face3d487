/* write_tables.h: the CSV summary and the human-readable tables (write_tables.c), each a struct
 * lp_sink (analysis.h) that writes the run's totals. */
#ifndef LP_WRITE_TABLES_H
#define LP_WRITE_TABLES_H

struct lp_sink;

/* 0, or -1 when out of memory; `k->out` is set by the caller. */
int lp_sink_csv(struct lp_sink *k);
int lp_sink_summary(struct lp_sink *k);

#endif
