/* state.c: the words every hook reads before anything else (state.h says what each means). They
 * live here, at the floor of the recorder, so that the files that set them (life.c, python.c,
 * sample.c) and the files that read them need not know one another. */
#include "state.h"

LP_TLS struct lpr_tls lpr_tls;
volatile uint32_t lpr_gate = LP_GATE_UNINIT;
int lpr_alloc_lean;
int lpr_alloc_tally;
int lpr_py_on;
int lpr_sampling;
