/*
** fuzz_scan.c -- arbitrary bytes through tl_scan: never crashes, never reads
** outside the buffer, and the verify-only and recording modes agree (and
** tl_scan_some with tl_scan); tl_check_bodies on rows cut from the same
** bytes flags exactly the bodies tl_checksum says hold.
**
** Input: 8 bytes of key, 1 byte of array capacity, then the log bytes.
*/
#include "fuzz_helpers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t key = fuzz_take_u64(&data, &size);
    size_t cap = 1 + (size ? data[0] % 16 : 0), total = 0, n = 0;
    struct tl_frame frames[16];
    struct tl_cursor cur = {0, 0, key}, verify_cur = {0, 0, key}, some_cur = {0, 0, key};
    uint32_t hints = 0, verify_hints = 0;
    int rc, verify_rc, some_rc;
    uint8_t *copy;

    if (size) {
        data++;
        size--;
    }
    /* A private copy, so AddressSanitizer catches any read past its end. */
    copy = (uint8_t *)calloc(1, size ? size : 1);
    FUZZ_ASSERT(copy != NULL);
    if (size) memcpy(copy, data, size);

    do {
        uint64_t before = cur.offset;
        size_t i;
        rc = tl_scan(copy, size, key, &cur, frames, cap, &n, &hints);
        FUZZ_ASSERT(n <= cap);
        FUZZ_ASSERT(cur.offset <= size && cur.offset % TL_ALIGN == 0);
        for (i = 0; i < n; i++) {
            FUZZ_ASSERT(frames[i].offset >= before && frames[i].offset < cur.offset);
            FUZZ_ASSERT(frames[i].stored_len <= TL_MAX_STORED);
            FUZZ_ASSERT(frames[i].offset + tl_frame_size(frames[i].stored_len) <= size);
        }
        total += n;
    } while (rc == TL_MORE);
    FUZZ_ASSERT(rc != TL_OK && rc != TL_INVALID_ARG && rc < TL_TOO_LARGE);
    FUZZ_ASSERT(rc == TL_END || hints == 0 || rc == TL_BAD_MAGIC || rc == TL_BAD_HEADER ||
                rc == TL_BAD_PAYLOAD);

    verify_rc = tl_scan(copy, size, key, &verify_cur, NULL, SIZE_MAX, &n, &verify_hints);
    FUZZ_ASSERT(verify_rc == rc && verify_hints == hints && n == total);
    FUZZ_ASSERT(verify_cur.offset == cur.offset && verify_cur.next_seq == cur.next_seq &&
                verify_cur.chain == cur.chain);
    FUZZ_ASSERT(tl_strerror(rc) != NULL);

    /* tl_scan_some: with every payload checked it is tl_scan; with none it
    ** walks at least as far, in bounds, and never fails a payload check. */
    some_rc =
        tl_scan_some(copy, size, key, &some_cur, NULL, SIZE_MAX, &n, &verify_hints, 0, UINT64_MAX);
    FUZZ_ASSERT(some_rc == rc && n == total && some_cur.offset == cur.offset &&
                some_cur.chain == cur.chain);
    some_cur = (struct tl_cursor){0, 0, key};
    some_rc = tl_scan_some(copy, size, key, &some_cur, NULL, SIZE_MAX, &n, &verify_hints, 1, 0);
    FUZZ_ASSERT(n >= total && some_cur.offset <= size && some_cur.offset % TL_ALIGN == 0);
    FUZZ_ASSERT(some_rc != TL_BAD_PAYLOAD && some_rc != TL_OK && some_rc != TL_INVALID_ARG);

    /* tl_check_bodies: up to 8 rows cut from the bytes at lengths the bytes
    ** give (0..765, often past the end of a short input), every other row's
    ** check the true one: each flag is what tl_checksum of that body says, a
    ** body past the end fails with every row after it, the count is the flags'. */
    {
        uint64_t rows[3 * 8];
        uint8_t ok[8];
        size_t i, nrows = size ? 1 + copy[0] % 8 : 0, at = 0, held, count = 0;
        int past = 0;
        for (i = 0; i < nrows; i++) {
            uint64_t len = (uint64_t)copy[i % size] * 3u;
            rows[3 * i] = cur.next_seq + i;
            rows[3 * i + 1] = len;
            rows[3 * i + 2] = key ^ i;
            if (!past && len <= size - at) {
                if (i & 1) rows[3 * i + 2] = tl_checksum(copy + at, (size_t)len, key + rows[3 * i]);
                at += (size_t)len;
            } else {
                past = 1;
            }
        }
        held = tl_check_bodies(copy, size, key, rows, nrows, ok);
        FUZZ_ASSERT(held <= nrows);
        at = 0;
        past = 0;
        for (i = 0; i < nrows; i++) {
            uint64_t len = rows[3 * i + 1];
            if (past || len > size - at) {
                past = 1;
                FUZZ_ASSERT(ok[i] == 0);
                continue;
            }
            FUZZ_ASSERT(ok[i] == (tl_checksum(copy + at, (size_t)len, key + rows[3 * i]) ==
                                  rows[3 * i + 2]));
            FUZZ_ASSERT(ok[i] || !(i & 1));
            at += (size_t)len;
            count += ok[i];
        }
        FUZZ_ASSERT(held == count);
    }

    if (rc != TL_END) {
        uint64_t found = 0;
        int frc = tl_find_frame(copy, size, key, cur.offset + 8, cur.next_seq, &found);
        FUZZ_ASSERT(frc == TL_END || (frc == TL_OK && found % 8 == 0 && found + 40 <= size));
    }
    free(copy);
    return 0;
}
