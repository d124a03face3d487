/* cc.h: the compiler's hints, one definition for the recorder and the tools. */
#ifndef LP_CC_H
#define LP_CC_H

#define LP_LIKELY(x) __builtin_expect(!!(x), 1)
#define LP_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
