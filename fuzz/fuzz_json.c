/*
** fuzz_json.c -- bytes -> tl_json_ok at every depth limit, and
** tl_encode_events with the JSON rules: never a read outside the input; a
** verdict that only grows with the limit; a payload accepted is framed and
** verifies; a refused one writes nothing and is named.
**
** Input: 1 byte depth limit, then the payload bytes.
*/
#include "fuzz_helpers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct tl_cursor cur = {0, 7, 0x1234}, scan_cur = {0, 7, 0x1234};
    struct tl_frame frame;
    size_t written = 1, failed = 1, got = 0, need;
    uint64_t check = 0;
    uint32_t depth;
    uint8_t *out, *payload;
    int ok, rc;

    if (size == 0) return 0;
    depth = data[0];
    data++;
    size--;
    /* The payload is copied so that ASan sees a read one past its end. */
    payload = (uint8_t *)malloc(size ? size : 1);
    FUZZ_ASSERT(payload != NULL);
    if (size) memcpy(payload, data, size);

    ok = tl_json_ok(payload, size, depth);
    /* A deeper limit never refuses what a shallower one accepts. */
    if (ok) FUZZ_ASSERT(tl_json_ok(payload, size, depth + 1) == 1);
    if (!ok && depth > 0) FUZZ_ASSERT(tl_json_ok(payload, size, depth - 1) == 0);

    need = tl_frame_size(size);
    out = (uint8_t *)malloc(need);
    FUZZ_ASSERT(out != NULL);
    rc = tl_encode_events(out, need, 0x1234, payload, size, NULL, 1, depth ? depth : 1, &cur,
                          &written, &check, &failed);
    if (tl_json_ok(payload, size, depth ? depth : 1)) {
        FUZZ_ASSERT(rc == TL_OK && written == need && cur.next_seq == 8);
        FUZZ_ASSERT(check == tl_checksum(out, need, 0x1234 + 7));
        rc = tl_scan(out, need, 0x1234, &scan_cur, &frame, 1, &got, NULL);
        FUZZ_ASSERT(rc == TL_END && got == 1 && frame.stored_len == size);
    } else {
        FUZZ_ASSERT(rc == TL_NOT_JSON && written == 0 && failed == 0 && cur.next_seq == 7);
    }
    free(out);
    free(payload);
    return 0;
}
