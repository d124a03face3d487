/* unhook.h: libprof off for good: hot pass-through hooks unbound from the program (unhook.c). */
#ifndef LPR_UNHOOK_H
#define LPR_UNHOOK_H

#include <stdint.h>

#include "state.h"

LP_HIDDEN void lpr_unhook(uint32_t families); /* keeps the hooks of `families` */
/* A hook that may be unbound when its family never records (hooks/hook.h, LP_UNHOOKABLE). */
struct lpr_unhookable {
    unsigned family;
    const char *name;
    void *hook;       /* the hook's own address (a hidden alias: no relocation against the export) */
    int (*may)(void); /* NULL, or asked at start-up: may it be unbound now? */
};

#endif
