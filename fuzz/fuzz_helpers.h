/*
** fuzz_helpers.h -- shared by the libFuzzer targets in this folder.
**
** Each target defines LLVMFuzzerTestOneInput and checks invariants with
** FUZZ_ASSERT, which aborts (a finding) instead of compiling away like
** assert() under -DNDEBUG.
*/
#ifndef FUZZ_HELPERS_H
#define FUZZ_HELPERS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tl.h"

#define FUZZ_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* Take up to 8 bytes from the front of the input as a little-endian integer. */
static inline uint64_t fuzz_take_u64(const uint8_t **data, size_t *size) {
    uint64_t v = 0;
    size_t n = *size < 8 ? *size : 8, i;
    for (i = 0; i < n; i++) v |= (uint64_t)(*data)[i] << (8 * i);
    *data += n;
    *size -= n;
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
