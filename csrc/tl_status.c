/*
** tl_status.c -- tl_strerror: one static English sentence per status code.
**
** The table is indexed by status value; trajlog/errors.py keeps the same
** texts for the pure-Python kernel and a test compares the two, so an
** exception message does not depend on which kernel produced the status.
*/
#include "tl.h"

static const char *const messages[] = {
    /* TL_OK */ "ok",
    /* TL_END */ "clean end of log",
    /* TL_MORE */ "frame array full; call again to continue",
    /* TL_TRUNCATED */ "frame truncated by the end of the data",
    /* TL_ZERO_TAIL */ "zero-filled tail",
    /* TL_BAD_MAGIC */ "bad frame magic",
    /* TL_BAD_HEADER */ "header checksum mismatch",
    /* TL_BAD_FIELD */ "header field out of range",
    /* TL_UNSUPPORTED */ "unsupported frame type or flag",
    /* TL_SEQ_MISMATCH */ "unexpected frame seq",
    /* TL_BAD_PAYLOAD */ "payload checksum mismatch",
    /* TL_BAD_PADDING */ "non-zero padding",
    /* TL_BAD_CHAIN */ "chain mismatch",
    /* TL_TOO_LARGE */ "payload over the size limit",
    /* TL_BUFFER_TOO_SMALL */ "output buffer too small",
    /* TL_INVALID_ARG */ "invalid argument",
    /* TL_NOT_JSON */ "payload is not JSON-compatible",
};

/* One message per status, so tl_strerror never returns NULL for a valid
** code (_kernel_c.strerror hands the pointer to ffi.string).  The codes run
** 0..TL_NOT_JSON with no gap: _format.Status and _format.MESSAGES mirror
** them one to one. */
_Static_assert(sizeof messages / sizeof messages[0] == TL_STATUS_COUNT, "one message per status");
_Static_assert(TL_STATUS_COUNT == TL_NOT_JSON + 1, "_format.Status: codes 0..NOT_JSON");

const char *tl_strerror(int status) {
    if (status < 0 || status >= TL_STATUS_COUNT) return "unknown status";
    return messages[status];
}
