/* What the C tests share: a check that names the line and rmx's words. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include "rmx.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, rmx_last_error());                        \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A call that must return `want`. */
#define EXPECT(call, want)                                                     \
    do {                                                                       \
        int got_ = (call);                                                     \
        if (got_ != (want)) {                                                  \
            fprintf(stderr, "%s:%d: %s returned %d (%s), not %d (%s); last error: %s\n", \
                    __FILE__, __LINE__, #call, got_, rmx_strerror(got_), (want), \
                    rmx_strerror(want), rmx_last_error());                     \
            exit(1);                                                           \
        }                                                                      \
    } while (0)
#endif
