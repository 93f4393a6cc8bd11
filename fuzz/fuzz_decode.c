/*
** fuzz_decode.c -- tl_decode_header on arbitrary bytes: whatever it accepts
** is within the format's limits, and it never reads past 40 bytes.
*/
#include "fuzz_helpers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct tl_frame f;
    size_t n = size < TL_HEADER_SIZE ? size : TL_HEADER_SIZE;
    uint8_t *copy = (uint8_t *)calloc(1, n ? n : 1);
    int rc;
    FUZZ_ASSERT(copy != NULL);
    if (n) memcpy(copy, data, n);
    rc = tl_decode_header(copy, n, &f);
    if (rc == TL_OK) {
        FUZZ_ASSERT(n == TL_HEADER_SIZE);
        FUZZ_ASSERT(f.type != 0 && f.stored_len <= TL_MAX_STORED && f.raw_len <= TL_MAX_RAW);
        FUZZ_ASSERT(f.seq <= TL_MAX_SEQ);
        FUZZ_ASSERT((f.flags & TL_FLAG_ZSTD) || f.raw_len == f.stored_len);
        FUZZ_ASSERT(tl_frame_size(f.stored_len) >= TL_HEADER_SIZE);
    } else {
        FUZZ_ASSERT(rc == TL_TRUNCATED || rc == TL_BAD_MAGIC || rc == TL_BAD_FIELD ||
                    rc == TL_UNSUPPORTED);
    }
    free(copy);
    return 0;
}
