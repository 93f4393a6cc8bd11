/*
** fuzz_roundtrip.c -- bytes -> a batch of payloads -> tl_encode_batch ->
** tl_scan: every frame verifies and gives back its payload, type and seq;
** then one flipped bit anywhere makes the scan stop before the end.
**
** Input: 8 bytes key, 8 bytes start seq, 1 byte frame count, then for each
** frame 1 byte type selector and 2 bytes length, then payload bytes.
*/
#include "fuzz_helpers.h"

#define MAX_FRAMES 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t kinds[] = {1, 2, 3, 4, 5, 6, 0x80, 0xFF};
    uint64_t key = fuzz_take_u64(&data, &size);
    uint64_t seq0 = fuzz_take_u64(&data, &size) & 0xFFFFFFFFFFFFull;
    uint64_t ends[MAX_FRAMES];
    uint8_t types[MAX_FRAMES];
    struct tl_frame frames[MAX_FRAMES];
    struct tl_cursor cur = {0, seq0, key}, scan_cur = {0, seq0, key};
    size_t n, i, total = 0, need = 0, written = 0, got = 0;
    uint8_t *out;
    int rc;

    if (size == 0) return 0;
    n = 1 + data[0] % MAX_FRAMES;
    data++;
    size--;
    if (size < 3 * n) return 0;
    for (i = 0; i < n; i++) {
        size_t len = (size_t)data[3 * i + 1] | ((size_t)data[3 * i + 2] << 8);
        types[i] = kinds[data[3 * i] % sizeof kinds];
        total += len;
        ends[i] = total;
    }
    data += 3 * n;
    size -= 3 * n;
    if (total > size) return 0;
    for (i = 0; i < n; i++) need += tl_frame_size((size_t)(ends[i] - (i ? ends[i - 1] : 0)));

    out = (uint8_t *)malloc(need);
    FUZZ_ASSERT(out != NULL);
    /* One byte short must fail cleanly and leave the cursor alone. */
    rc = tl_encode_batch(out, need - 1, key, data, total, ends, types, NULL, NULL, n, &cur,
                         &written);
    FUZZ_ASSERT(rc == TL_BUFFER_TOO_SMALL && written == 0 && cur.next_seq == seq0);
    rc = tl_encode_batch(out, need, key, data, total, ends, types, NULL, NULL, n, &cur, &written);
    FUZZ_ASSERT(rc == TL_OK && written == need && cur.next_seq == seq0 + n);

    rc = tl_scan(out, need, key, &scan_cur, frames, MAX_FRAMES, &got, NULL);
    FUZZ_ASSERT(rc == TL_END && got == n);
    FUZZ_ASSERT(scan_cur.chain == cur.chain && scan_cur.offset == need);
    for (i = 0; i < n; i++) {
        size_t start = (size_t)(i ? ends[i - 1] : 0);
        FUZZ_ASSERT(frames[i].seq == seq0 + i && frames[i].type == types[i]);
        FUZZ_ASSERT(frames[i].stored_len == ends[i] - start);
        FUZZ_ASSERT(memcmp(out + frames[i].offset + TL_HEADER_SIZE, data + start,
                           frames[i].stored_len) == 0);
    }

    /* Flip one bit chosen by the data: verification must no longer reach the
    ** end with every frame intact. */
    if (need > 0) {
        size_t pos = (size_t)(cur.chain % need);
        struct tl_cursor again = {0, seq0, key};
        out[pos] ^= (uint8_t)(1u << (cur.chain >> 61));
        rc = tl_scan(out, need, key, &again, NULL, SIZE_MAX, &got, NULL);
        FUZZ_ASSERT(rc != TL_END || got < n);
    }
    free(out);
    return 0;
}
