/* names.h: interned annotation names (names.c). */
#ifndef LPR_NAMES_H
#define LPR_NAMES_H

#include <stdint.h>

#include "state.h"

LP_HIDDEN uint32_t lpr_name_id(const char *name);
LP_HIDDEN void lpr_names_after_fork_child(void);

#endif
