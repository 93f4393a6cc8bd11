/*
** tl_scan.c -- the verifying walk over a buffer of frames.
**
** tl_scan is the one place where bytes from outside become trusted.  It
** reads a frame's fields only in the order in which they can be trusted
** (FORMAT.md section 5):
**
**   1. bytes left == 0                 -> TL_END (clean)
**   2. fewer than 40 bytes left        -> TL_ZERO_TAIL if all zero, else
**                                         TL_TRUNCATED (short header)
**   3. magic != A7 F1                  -> TL_ZERO_TAIL if everything to the
**                                         end is zero, else TL_BAD_MAGIC
**   4. hdr_check                       -> TL_BAD_HEADER
**   5. field ranges                    -> TL_BAD_FIELD / TL_UNSUPPORTED
**   6. 40 + stored_len + pad fits      -> TL_TRUNCATED (body past the end)
**   7. seq == cursor.next_seq          -> TL_SEQ_MISMATCH
**   8. payload_check                   -> TL_BAD_PAYLOAD
**   9. pad bytes zero                  -> TL_BAD_PADDING
**  10. chain == f(header, prev chain)  -> TL_BAD_CHAIN
**
** Only after step 4 is a length from the data used, and only after step 6
** is it used to address memory.  Lengths are bounded by the range checks
** (16 MiB), so 40 + stored_len + pad cannot overflow even a 32-bit size_t,
** and it is compared with the bytes left rather than added to an offset.
**
** The scanner classifies; it does not decide.  Whether a TL_TRUNCATED tail
** is a torn write to drop or a loss of acknowledged data is policy that
** needs the durable watermark, which only the caller knows (trajlog.codec).
** To let the caller apply the no-watermark rule as well, a failing checksum
** reports TL_HINT_ZERO_SECTOR when the failing region holds an all-zero
** 512-byte-aligned chunk (etcd's isTornEntry), and tl_find_frame looks for
** a later valid frame, whose presence makes a defect a hole, not a tail.
**
** Like SQLite's WAL recovery, the walk stops at the first invalid frame: a
** frame after a defect is never trusted, because the defect may have been a
** corrupted length.
*/
#include "tl_internal.h"

/* True when all n bytes at p are zero. */
static int all_zero(const uint8_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] != 0) return 0;
    return 1;
}

/*
** True when some piece of buf[start..end), cut at multiples of TL_SECTOR,
** is entirely zero.  Pieces at either edge may be shorter than a sector;
** they count too, as in etcd, because a lost sector zeroes whatever part of
** the frame it held.
*/
static int has_zero_sector(const uint8_t *buf, size_t start, size_t end) {
    while (start < end) {
        size_t next = (start / TL_SECTOR + 1) * TL_SECTOR;
        if (next > end) next = end;
        if (all_zero(buf + start, next - start)) return 1;
        start = next;
    }
    return 0;
}

/*
** The walk of tl_scan and tl_scan_some: step 8 (the payload check) runs only
** for frames whose seq is in [check_lo, check_hi]; every other step runs for
** every frame.
*/
static int scan_frames(const uint8_t *buf, size_t buf_len, uint64_t key, struct tl_cursor *cur,
                       struct tl_frame *frames, size_t frames_cap, size_t *n_frames,
                       uint32_t *hints, uint64_t check_lo, uint64_t check_hi) {
    size_t p, count = 0;
    uint64_t seq, chain;
    uint32_t hint = 0;
    int rc;

    if (cur == NULL || n_frames == NULL || (buf == NULL && buf_len > 0)) return TL_INVALID_ARG;
    *n_frames = 0;
    if (hints) *hints = 0;
    if (cur->offset > buf_len || (cur->offset & (TL_ALIGN - 1)) != 0) return TL_INVALID_ARG;

    p = (size_t)cur->offset;
    seq = cur->next_seq;
    chain = cur->chain;
    for (;;) {
        const uint8_t *h = buf + p;
        size_t left = buf_len - p, stored, body, i;
        uint64_t next_chain;

        if (left == 0) {
            rc = TL_END;
            break;
        }
        if (count == frames_cap) {
            rc = TL_MORE;
            break;
        }
        if (left < TL_HEADER_SIZE) {
            rc = all_zero(h, left) ? TL_ZERO_TAIL : TL_TRUNCATED;
            break;
        }
        if (h[OFF_MAGIC] != MAGIC0 || h[OFF_MAGIC + 1] != MAGIC1) {
            if (all_zero(h, left)) {
                rc = TL_ZERO_TAIL;
            } else {
                rc = TL_BAD_MAGIC;
                if (has_zero_sector(buf, p, p + TL_HEADER_SIZE)) hint |= TL_HINT_ZERO_SECTOR;
            }
            break;
        }
        if (header_check(h, key) != ld32(h + OFF_HCHECK)) {
            rc = TL_BAD_HEADER;
            if (has_zero_sector(buf, p, p + TL_HEADER_SIZE)) hint |= TL_HINT_ZERO_SECTOR;
            break;
        }
        rc = tl__check_fields(h);
        if (rc != TL_OK) break;
        /* From here stored_len is trusted to be <= TL_MAX_STORED. */
        stored = ld32(h + OFF_STORED);
        body = stored + pad_of(stored);
        if (left - TL_HEADER_SIZE < body) {
            rc = TL_TRUNCATED;
            break;
        }
        if (ld64(h + OFF_SEQ) != seq) {
            rc = TL_SEQ_MISMATCH;
            break;
        }
        if (seq >= check_lo && seq <= check_hi &&
            tl__xxh3_64(h + TL_HEADER_SIZE, stored, key ^ seq) != ld64(h + OFF_PCHECK)) {
            rc = TL_BAD_PAYLOAD;
            if (has_zero_sector(buf, p + TL_HEADER_SIZE, p + TL_HEADER_SIZE + stored))
                hint |= TL_HINT_ZERO_SECTOR;
            break;
        }
        for (i = stored; i < body; i++)
            if (h[TL_HEADER_SIZE + i] != 0) break;
        if (i < body) {
            rc = TL_BAD_PADDING;
            break;
        }
        next_chain = chain_of(h, chain);
        if (next_chain != ld64(h + OFF_CHAIN)) {
            rc = TL_BAD_CHAIN;
            break;
        }

        /* The frame verified: record it and advance. */
        if (frames != NULL) tl__read_header(h, (uint64_t)p, &frames[count]);
        count += 1;
        p += TL_HEADER_SIZE + body;
        seq += 1;
        chain = next_chain;
    }
    cur->offset = (uint64_t)p;
    cur->next_seq = seq;
    cur->chain = chain;
    *n_frames = count;
    if (hints) *hints = hint;
    return rc;
}

int tl_scan(const uint8_t *buf, size_t buf_len, uint64_t key, struct tl_cursor *cur,
            struct tl_frame *frames, size_t frames_cap, size_t *n_frames, uint32_t *hints) {
    return scan_frames(buf, buf_len, key, cur, frames, frames_cap, n_frames, hints, 0, UINT64_MAX);
}

/*
** Why a caller may leave payloads unchecked (see tl.h): it calls this only on
** the body of a chunk row whose body check (XXH3-64 of the stored body) has
** just held, so every byte is the one stored with the row, and it hands out
** only the payloads of [check_lo, check_hi] -- which are still checked,
** because the payload check is the one check that ties a payload to the chain
** (the chain covers the payload's check, not its bytes, and the body check is
** outside the chain: a writer that rewrites a body can recompute it).  The
** headers, seqs, padding and chain of every frame are still verified, so the
** walk still proves n frames in order ending at the row's last chain; an
** unchecked payload can only be one the caller never returns.
*/
int tl_scan_some(const uint8_t *buf, size_t buf_len, uint64_t key, struct tl_cursor *cur,
                 struct tl_frame *frames, size_t frames_cap, size_t *n_frames, uint32_t *hints,
                 uint64_t check_lo, uint64_t check_hi) {
    return scan_frames(buf, buf_len, key, cur, frames, frames_cap, n_frames, hints, check_lo,
                       check_hi);
}

int tl_find_frame(const uint8_t *buf, size_t buf_len, uint64_t key, uint64_t from, uint64_t min_seq,
                  uint64_t *found) {
    uint64_t q;
    if (found == NULL || (buf == NULL && buf_len > 0)) return TL_INVALID_ARG;
    if (from > buf_len) return TL_END;
    /* Round up to the next 8-aligned offset without overflowing. */
    q = from + ((0u - from) & (TL_ALIGN - 1));
    for (; q + TL_HEADER_SIZE <= buf_len; q += TL_ALIGN) {
        const uint8_t *h = buf + q;
        if (h[OFF_MAGIC] != MAGIC0 || h[OFF_MAGIC + 1] != MAGIC1) continue;
        if (header_check(h, key) != ld32(h + OFF_HCHECK)) continue;
        if (ld64(h + OFF_SEQ) < min_seq) continue;
        *found = q;
        return TL_OK;
    }
    return TL_END;
}
