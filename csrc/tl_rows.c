/*
** tl_rows.c -- the body checks of many chunk rows in one call.
**
** A read over a run of small rows (one a single append, until a repack
** merges them) used to check each row's body with its own tl_checksum call:
** one trip through cffi a row, about as dear as the check of a small body
** itself.  tl_check_bodies takes the stored bodies of n rows laid end to end
** (the caller joins them: one copy, which it needs anyway to scan them as
** one) and checks them all, in row order, in one call.
**
** It computes exactly what n calls of tl_checksum would (FORMAT.md 7.2,
** step 2: XXH3-64 of the stored body, seeded with the session key plus the
** row's first seq, mod 2^64), so a row it passes is a row the one-by-one
** check passes, and the reference kernel (_kernel_py.check_bodies) gives the
** same flags.  It says which bodies hold; it never decides what a failing
** row means -- the caller opens that row alone, which names the defect.
**
** The lengths come from the caller's rows (SQLite's own length of each
** stored body), but the buffer is trusted for nothing: a length that would
** take a body past the end of buf is never used to address memory, and that
** body and every later one are reported as failing.
*/
#include "tl_internal.h"

size_t tl_check_bodies(const uint8_t *buf, size_t buf_len, uint64_t key, const uint64_t *rows,
                       size_t n, uint8_t *ok) {
    size_t i, at = 0, held = 0;
    if (n == 0) return 0;
    if (rows == NULL || ok == NULL || (buf == NULL && buf_len != 0)) return 0;
    memset(ok, 0, n);
    for (i = 0; i < n; i++) {
        uint64_t first = rows[3 * i], len = rows[3 * i + 1], check = rows[3 * i + 2];
        /*
        ** Compared with the bytes left, never added to an offset first: a
        ** huge length cannot wrap around to a small one.  Once a body runs
        ** past the end, where the later ones begin is unknown: all fail.
        */
        if (len > (uint64_t)(buf_len - at)) break;
        /* key + first wraps mod 2^64, as the seed of FORMAT.md 7.2 does */
        /* (buf + at only when at > 0: no offset is applied to a NULL buf) */
        if (tl__xxh3_64(at ? buf + at : buf, (size_t)len, key + first) == check) {
            ok[i] = 1;
            held++;
        }
        at += (size_t)len;
    }
    return held;
}
