/*
** tl_frame.c -- frame format v1: the layout, the encoder and the header
** decoder.  The scanner that verifies whole logs is in tl_scan.c.
**
** THE FRAME FORMAT (normative text: FORMAT.md; this is the same rule,
** restated for readers of the C)
**
** A log is a sequence of frames laid end to end.  Every frame starts at an
** 8-byte-aligned offset and is 40 + stored_len + pad bytes long, where
** pad = (-stored_len) mod 8 and every pad byte is zero.  All integers are
** little-endian.  Because 512 is a multiple of 8, no 8-byte field of a
** frame ever straddles a disk sector, so a torn sector never splits one.
**
**    offset size field          rule
**       0    2   magic          A7 F1.  Never 00 00, so zero-filled space
**                               (preallocation, lost appends) never parses
**                               as a header.
**       2    1   type           0 invalid.  1 SESSION_HEADER, 2 EVENT,
**                               3 MEMORY, 4 TOMBSTONE, 5 SEAL, 6 CHUNK.
**                               0x80..0xFF optional (skippable, but still
**                               checked and sequenced).  Others: a newer
**                               version's mandatory type -> unsupported.
**       3    1   flags          bit0 ZSTD: payload is one zstd frame.
**                               bit1 ZSTD_DICT: compressed with the store
**                               dictionary (requires bit0).  Bits 2..7 are
**                               reserved: set -> unsupported.
**       4    4   stored_len     payload bytes as stored, <= 16 MiB.
**       8    4   raw_len        bytes after decompression, <= 64 MiB; equal
**                               to stored_len when bit0 is clear.
**      12    4   hdr_check      low 32 bits of XXH3-64(bytes 0..12 ||
**                               bytes 16..40, seed = session key).
**      16    8   seq            position in the log; exactly previous + 1;
**                               at most 2^63 - 1 (an SQLite INTEGER).
**      24    8   payload_check  XXH3-64(stored payload, seed = key ^ seq).
**      32    8   chain          XXH3-64(bytes 0..12 || bytes 16..32,
**                               seed = previous frame's chain); the first
**                               frame of a log is seeded with the key, the
**                               first own frame of a fork with the chain of
**                               the parent's frame at seed_length - 1.
**      40    n   payload
**    40+n  0..7  pad            zero
**
** Why the pieces.  The header check validates the two lengths before they
** are trusted, so "header valid, body runs past the end" is an exact torn
** write signature rather than a guess.  Seeding the payload check with the
** session key and the seq makes a frame copied from another session, or
** from another position of this one, fail like random damage would.  The
** chain makes each frame depend on every earlier one, so a dropped,
** duplicated or swapped frame fails even if its own checks pass, and one
** 64-bit chain head names a whole history.  Because headers carry the
** payload check, the chain commits to every payload, yet a payload erased
** later (tombstone) leaves the chain verifiable.
**
** Nothing here decompresses: compression is a flag and two lengths; the
** Python layer decompresses after the frame verified, bounded by raw_len.
*/
#include "tl_internal.h"

uint32_t tl_format_version(void) { return TL_FORMAT_VERSION; }

size_t tl_frame_size(size_t stored_len) {
    if (stored_len > TL_MAX_STORED) return 0;
    return TL_HEADER_SIZE + stored_len + pad_of(stored_len);
}

uint64_t tl_checksum(const uint8_t *data, size_t len, uint64_t seed) {
    if (data == NULL) len = 0; /* contract: NULL only with len 0 */
    return tl__xxh3_64(data, len, seed);
}

/*
** Validate the arguments of one frame to be encoded.  The same rules as
** tl__check_fields (what a reader accepts), but phrased as caller errors.
*/
static int check_encode(uint32_t type, uint32_t flags, uint32_t raw_len, size_t payload_len) {
    if (type > 0xFF || type_status(type) != TL_OK) return TL_INVALID_ARG;
    if ((flags & ~(uint32_t)TL_FLAGS_KNOWN) != 0) return TL_INVALID_ARG;
    if ((flags & TL_FLAG_ZSTD_DICT) && !(flags & TL_FLAG_ZSTD)) return TL_INVALID_ARG;
    if (payload_len > TL_MAX_STORED || raw_len > TL_MAX_RAW) return TL_TOO_LARGE;
    if (!(flags & TL_FLAG_ZSTD) && raw_len != payload_len) return TL_INVALID_ARG;
    return TL_OK;
}

/*
** Write one frame whose arguments were validated and whose destination is
** known to be large enough.  Returns the new frame's chain.  The fields are
** written in dependency order: payload_check, then the chain over the
** header prefix that includes it, then hdr_check over everything.
*/
static uint64_t write_frame(uint8_t *out, uint64_t key, uint32_t type, uint32_t flags,
                            uint32_t raw_len, const uint8_t *payload, size_t len, uint64_t seq,
                            uint64_t prev_chain) {
    size_t pad = pad_of(len);
    uint64_t chain;
    out[OFF_MAGIC] = MAGIC0;
    out[OFF_MAGIC + 1] = MAGIC1;
    out[OFF_TYPE] = (uint8_t)type;
    out[OFF_FLAGS] = (uint8_t)flags;
    st32(out + OFF_STORED, (uint32_t)len);
    st32(out + OFF_RAW, raw_len);
    st64(out + OFF_SEQ, seq);
    st64(out + OFF_PCHECK, tl__xxh3_64(payload, len, key ^ seq));
    chain = chain_of(out, prev_chain);
    st64(out + OFF_CHAIN, chain);
    st32(out + OFF_HCHECK, header_check(out, key));
    if (len > 0) memcpy(out + TL_HEADER_SIZE, payload, len);
    memset(out + TL_HEADER_SIZE + len, 0, pad);
    return chain;
}

int tl_encode(uint8_t *out, size_t out_cap, uint64_t key, uint32_t type, uint32_t flags,
              uint32_t raw_len, const uint8_t *payload, size_t payload_len, struct tl_cursor *cur,
              size_t *written) {
    size_t need;
    int rc;
    if (written == NULL || cur == NULL) return TL_INVALID_ARG;
    *written = 0;
    if ((out == NULL && out_cap > 0) || (payload == NULL && payload_len > 0)) return TL_INVALID_ARG;
    if (cur->next_seq > TL_MAX_SEQ) return TL_INVALID_ARG;
    rc = check_encode(type, flags, raw_len, payload_len);
    if (rc != TL_OK) return rc;
    need = tl_frame_size(payload_len);
    if (out_cap < need) return TL_BUFFER_TOO_SMALL;
    cur->chain = write_frame(out, key, type, flags, raw_len, payload, payload_len, cur->next_seq,
                             cur->chain);
    cur->next_seq += 1;
    cur->offset += need;
    *written = need;
    return TL_OK;
}

int tl_encode_batch(uint8_t *out, size_t out_cap, uint64_t key, const uint8_t *payloads,
                    size_t payloads_len, const uint64_t *ends, const uint8_t *types,
                    const uint8_t *flags, const uint32_t *raw_lens, size_t n, struct tl_cursor *cur,
                    size_t *written) {
    size_t i, need = 0, pos = 0;
    uint64_t start = 0, seq, chain;
    int rc;
    if (written == NULL || cur == NULL) return TL_INVALID_ARG;
    *written = 0;
    if (n == 0) return TL_OK;
    if (ends == NULL || types == NULL || (payloads == NULL && payloads_len > 0) ||
        (out == NULL && out_cap > 0))
        return TL_INVALID_ARG;
    /* Every seq of the batch must stay within range: next_seq + n - 1. */
    if (cur->next_seq > TL_MAX_SEQ || n - 1 > TL_MAX_SEQ - cur->next_seq) return TL_INVALID_ARG;

    /* Pass 1: validate everything and size the output, so that a bad frame
    ** anywhere in the batch writes nothing (all or nothing). */
    for (i = 0; i < n; i++) {
        size_t len;
        uint32_t fl = flags ? flags[i] : 0;
        if (ends[i] < start || ends[i] > payloads_len) return TL_INVALID_ARG;
        len = (size_t)(ends[i] - start);
        rc = check_encode(types[i], fl, raw_lens ? raw_lens[i] : (uint32_t)len, len);
        /* raw_lens == NULL with len > UINT32_MAX: check_encode sees a
        ** truncated raw_len, but len > TL_MAX_STORED already failed. */
        if (rc != TL_OK) return rc;
        /* tl_frame_size(len) <= 16 MiB + 48, so the sum overflows only
        ** after ~2^40 frames; guard anyway. */
        if (need > SIZE_MAX - tl_frame_size(len)) return TL_TOO_LARGE;
        need += tl_frame_size(len);
        start = ends[i];
    }
    if (start != payloads_len) return TL_INVALID_ARG;
    if (out_cap < need) return TL_BUFFER_TOO_SMALL;

    /* Pass 2: write. */
    start = 0;
    seq = cur->next_seq;
    chain = cur->chain;
    for (i = 0; i < n; i++) {
        size_t len = (size_t)(ends[i] - start);
        uint32_t fl = flags ? flags[i] : 0;
        uint32_t raw = raw_lens ? raw_lens[i] : (uint32_t)len;
        chain = write_frame(out + pos, key, types[i], fl, raw, payloads + start, len, seq, chain);
        pos += tl_frame_size(len);
        seq += 1;
        start = ends[i];
    }
    cur->next_seq = seq;
    cur->chain = chain;
    cur->offset += pos;
    *written = pos;
    return TL_OK;
}

/*
** The write path's one call: n event payloads checked against the JSON rules
** (tl_json.c), framed, and hashed as one chunk row body -- everything the
** append needs from the core, in a single pass over bytes that are still in
** cache.  Pass 1 validates every payload (lengths, JSON) before anything is
** written, so a refusal anywhere writes nothing and names the payload.
*/
int tl_encode_events(uint8_t *out, size_t out_cap, uint64_t key, const uint8_t *payloads,
                     size_t payloads_len, const uint64_t *ends, size_t n, uint32_t json_depth,
                     struct tl_cursor *cur, size_t *written, uint64_t *body_check, size_t *failed) {
    size_t i, need = 0, pos = 0;
    uint64_t start = 0, seq, chain, first;
    if (written == NULL || cur == NULL || body_check == NULL || failed == NULL)
        return TL_INVALID_ARG;
    *written = 0;
    *failed = 0;
    if (n == 0) return TL_OK;
    if ((ends == NULL && n != 1) || (payloads == NULL && payloads_len > 0) ||
        (out == NULL && out_cap > 0))
        return TL_INVALID_ARG;
    if (cur->next_seq > TL_MAX_SEQ || n - 1 > TL_MAX_SEQ - cur->next_seq) return TL_INVALID_ARG;

    /* Pass 1: lengths, then the JSON rules, payload by payload. */
    for (i = 0; i < n; i++) {
        uint64_t end = ends ? ends[i] : payloads_len;
        size_t len;
        if (end < start || end > payloads_len) return TL_INVALID_ARG;
        len = (size_t)(end - start);
        if (len > TL_MAX_STORED) {
            *failed = i;
            return TL_TOO_LARGE;
        }
        if (json_depth > 0 && !tl_json_ok(payloads + start, len, json_depth)) {
            *failed = i;
            return TL_NOT_JSON;
        }
        if (need > SIZE_MAX - tl_frame_size(len)) return TL_TOO_LARGE;
        need += tl_frame_size(len);
        start = end;
    }
    if (start != payloads_len) return TL_INVALID_ARG;
    if (out_cap < need) return TL_BUFFER_TOO_SMALL;

    /* Pass 2: the frames, then the body check of all of them as one row. */
    start = 0;
    first = seq = cur->next_seq;
    chain = cur->chain;
    for (i = 0; i < n; i++) {
        uint64_t end = ends ? ends[i] : payloads_len;
        size_t len = (size_t)(end - start);
        chain = write_frame(out + pos, key, TL_TYPE_EVENT, 0, (uint32_t)len, payloads + start, len,
                            seq, chain);
        pos += tl_frame_size(len);
        seq += 1;
        start = end;
    }
    *body_check = tl__xxh3_64(out, pos, key + first); /* mod 2^64: FORMAT.md 7 */
    cur->next_seq = seq;
    cur->chain = chain;
    cur->offset += pos;
    *written = pos;
    return TL_OK;
}

int tl__check_fields(const uint8_t *h) {
    uint32_t type = h[OFF_TYPE], flags = h[OFF_FLAGS];
    uint32_t stored = ld32(h + OFF_STORED), raw = ld32(h + OFF_RAW);
    int rc = type_status(type);
    if (rc != TL_OK) return rc;
    if ((flags & ~(uint32_t)TL_FLAGS_KNOWN) != 0) return TL_UNSUPPORTED;
    if ((flags & TL_FLAG_ZSTD_DICT) && !(flags & TL_FLAG_ZSTD)) return TL_BAD_FIELD;
    if (stored > TL_MAX_STORED || raw > TL_MAX_RAW) return TL_BAD_FIELD;
    if (!(flags & TL_FLAG_ZSTD) && raw != stored) return TL_BAD_FIELD;
    if (ld64(h + OFF_SEQ) > TL_MAX_SEQ) return TL_BAD_FIELD;
    return TL_OK;
}

void tl__read_header(const uint8_t *h, uint64_t offset, struct tl_frame *f) {
    f->offset = offset;
    f->seq = ld64(h + OFF_SEQ);
    f->payload_check = ld64(h + OFF_PCHECK);
    f->chain = ld64(h + OFF_CHAIN);
    f->stored_len = ld32(h + OFF_STORED);
    f->raw_len = ld32(h + OFF_RAW);
    f->type = h[OFF_TYPE];
    f->flags = h[OFF_FLAGS];
    memset(f->reserved, 0, sizeof f->reserved);
}

int tl_decode_header(const uint8_t *buf, size_t buf_len, struct tl_frame *frame) {
    int rc;
    if (frame == NULL || (buf == NULL && buf_len > 0)) return TL_INVALID_ARG;
    if (buf_len < TL_HEADER_SIZE) return TL_TRUNCATED;
    if (buf[OFF_MAGIC] != MAGIC0 || buf[OFF_MAGIC + 1] != MAGIC1) return TL_BAD_MAGIC;
    rc = tl__check_fields(buf);
    if (rc != TL_OK) return rc;
    tl__read_header(buf, 0, frame);
    return TL_OK;
}
