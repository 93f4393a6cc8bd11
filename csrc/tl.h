/*
** tl.h -- the whole public C API of the trajlog frame core.
**
** The core turns event payloads into checksummed, chained frames and walks
** buffers of frames verifying every check.  It is plain C11: bytes in,
** structs and status codes out.  It performs no I/O, allocates no memory,
** keeps no mutable global state and never calls back into Python, so every
** function is reentrant and may run with the GIL released.  The byte layout
** it implements is specified normatively in FORMAT.md at the repository root
** and again, for readers of the C, at the top of tl_frame.c.
**
** Conventions (zstd's dst-first order, SQLite's OUT annotations):
**   - destination first, then source, then the cursor, then out-parameters;
**   - buffers travel as (pointer, length) pairs; a NULL pointer is allowed
**     only when its length is 0;
**   - every function that can fail returns an int status from the TL_*
**     list below; out-parameters are written only as each contract says.
**
** The block between the cdef markers is handed verbatim to cffi (see
** csrc/ffibuild.py), so it may contain only declarations cffi can parse:
** integer #defines, struct definitions and prototypes.
*/
#ifndef TL_H
#define TL_H

#include <stddef.h>
#include <stdint.h>

/* Nothing here is exported from the shared object: the library is built with
** -fvisibility=hidden and reached only through cffi's generated wrappers,
** compiled into the same extension module. */

/* cdef-begin */

/* Format constants (FORMAT.md section 2). */
#define TL_FORMAT_VERSION 1
#define TL_HEADER_SIZE 40              /* bytes before the payload of every frame */
#define TL_ALIGN 8                     /* frames start and end on 8-byte boundaries */
#define TL_MAX_STORED 16777216         /* 16 MiB: largest stored payload */
#define TL_MAX_RAW 67108864            /* 64 MiB: largest payload after decompression */
#define TL_SECTOR 512                  /* torn-write granule for the zero-sector hint */
#define TL_MAX_SEQ 9223372036854775807 /* 2^63 - 1: seqs fit an SQLite INTEGER */

/* Frame types (byte 2).  0 is never valid; 0x80..0xFF are optional types a
** reader may skip; any other value is unsupported by this version. */
#define TL_TYPE_SESSION_HEADER 1
#define TL_TYPE_EVENT 2
#define TL_TYPE_MEMORY 3
#define TL_TYPE_TOMBSTONE 4
#define TL_TYPE_SEAL 5
#define TL_TYPE_CHUNK 6
#define TL_TYPE_OPTIONAL_MIN 128

/* Frame flags (byte 3).  Bits 2..7 are reserved and must be zero. */
#define TL_FLAG_ZSTD 1      /* payload is exactly one zstd frame */
#define TL_FLAG_ZSTD_DICT 2 /* ... compressed with the store dictionary */
#define TL_FLAGS_KNOWN 3

/* Status codes.  The numbering is part of the API: the pure-Python kernel
** returns the same integers and trajlog.errors maps each to one exception. */
#define TL_OK 0                /* success */
#define TL_END 1               /* scan: clean end, cursor at buf_len */
#define TL_MORE 2              /* scan: frames_cap reached; call again */
#define TL_TRUNCATED 3         /* fewer than 40 bytes left, or body past end */
#define TL_ZERO_TAIL 4         /* every byte from the cursor to the end is 0 */
#define TL_BAD_MAGIC 5         /* the first two bytes are not A7 F1 */
#define TL_BAD_HEADER 6        /* header check mismatch */
#define TL_BAD_FIELD 7         /* checked header holds an impossible value */
#define TL_UNSUPPORTED 8       /* unknown mandatory type or reserved flag */
#define TL_SEQ_MISMATCH 9      /* seq is not the expected next seq */
#define TL_BAD_PAYLOAD 10      /* payload check mismatch */
#define TL_BAD_PADDING 11      /* a padding byte is not zero */
#define TL_BAD_CHAIN 12        /* chain does not follow the previous frame */
#define TL_TOO_LARGE 13        /* encode: payload or raw length over limit */
#define TL_BUFFER_TOO_SMALL 14 /* encode: out_cap too small */
#define TL_INVALID_ARG 15      /* a caller broke a precondition */
#define TL_NOT_JSON 16         /* encode: a payload breaks the JSON rules (tl_json.c) */
#define TL_STATUS_COUNT 17

/* Hint bits returned by tl_scan beside a failing status.  ZERO_SECTOR: the
** failing region holds an all-zero, 512-byte-aligned chunk (torn signature). */
#define TL_HINT_ZERO_SECTOR 1

/* Continuity state carried from frame to frame and from call to call.  The
** same struct serves writing and reading.  A fresh log starts at
** {offset 0, next_seq 0, chain = session key}; a forked log starts at
** {0, seed_length, chain of the parent's frame seed_length - 1}. */
struct tl_cursor {
    uint64_t offset;   /* byte position of the next frame in the stream */
    uint64_t next_seq; /* seq the next frame must carry */
    uint64_t chain;    /* chain of the previous frame (the seed) */
};

/* One decoded frame header, as returned by tl_decode_header and tl_scan.
** Python unpacks it from raw bytes (_kernel_c._FRAME), so its layout, like
** tl_cursor's, is pinned by _Static_asserts in tl_internal.h. */
struct tl_frame {
    uint64_t offset; /* byte offset of the frame in the scanned buffer */
    uint64_t seq;
    uint64_t payload_check;
    uint64_t chain;
    uint32_t stored_len; /* payload bytes as stored (before padding) */
    uint32_t raw_len;    /* payload bytes after decompression */
    uint8_t type;
    uint8_t flags;
    uint8_t reserved[6]; /* always written as zero */
};

/*
** Return TL_FORMAT_VERSION as compiled.  The Python side compares it with
** the reference kernel's constant at import.
*/
uint32_t tl_format_version(void);

/*
** Return the exact encoded size of a frame whose stored payload is
** stored_len bytes (header + payload + zero padding to 8), or 0 when
** stored_len exceeds TL_MAX_STORED.  Never overflows.
*/
size_t tl_frame_size(size_t stored_len);

/*
** Return XXH3-64 of data[0..len) with the given seed, computed by our own
** implementation of the public xxHash specification (tl_xxh3.c).  data may
** be NULL when len is 0.  Identical on every host byte order.
*/
uint64_t tl_checksum(const uint8_t *data, size_t len, uint64_t seed);

/*
** Check the body checks of n chunk rows at once (FORMAT.md 7.2, step 2):
** their stored bodies lie end to end in buf, and rows holds three values a
** row -- its first seq, its stored body's length, its body check -- so that
** row i's body is the rows[3i+1] bytes after row i-1's.  Row i holds when
** tl_checksum(body, key + first seq) (the sum mod 2^64) equals its check.
**
** Sets ok[i] to 1 for each row that holds and 0 for each that does not; a
** body that would run past buf_len fails, and so does every row after it.
** Returns how many rows hold (n when all do).  Returns 0, writing nothing,
** when n is 0 or a needed pointer is NULL (buf may be NULL when buf_len is 0).
*/
size_t tl_check_bodies(const uint8_t *buf, size_t buf_len, uint64_t key, const uint64_t *rows,
                       size_t n, uint8_t *ok);

/*
** Encode one frame into out[0..) and advance the cursor.
**
**   out, out_cap     destination; needs tl_frame_size(payload_len) bytes
**   key              the session key (XXH3-64 of the 16-byte session UUID)
**   type, flags      frame type and flag bits (see above)
**   raw_len          decompressed length; must equal payload_len unless
**                    flags has TL_FLAG_ZSTD
**   payload          stored payload bytes, payload_len of them
**   cur              IN/OUT: seq and chain to use; on TL_OK next_seq += 1,
**                    chain = the new frame's chain, offset += *written
**   written          OUT: bytes written (0 on failure)
**
** Returns TL_OK, TL_TOO_LARGE (payload_len > TL_MAX_STORED or raw_len >
** TL_MAX_RAW), TL_BUFFER_TOO_SMALL, or TL_INVALID_ARG (NULL pointers, type
** 0 or unsupported, unknown flags, ZSTD_DICT without ZSTD, raw_len !=
** payload_len for an uncompressed frame, next_seq == UINT64_MAX).  On any
** failure the cursor and *written are unchanged / 0 and out may have been
** partially written.
*/
int tl_encode(uint8_t *out, size_t out_cap, uint64_t key, uint32_t type, uint32_t flags,
              uint32_t raw_len, const uint8_t *payload, size_t payload_len, struct tl_cursor *cur,
              size_t *written);

/*
** Encode n frames in one call, back to back, into out[0..).
**
**   payloads         all stored payloads concatenated
**   ends             ends[i] = end offset of payload i in payloads; must be
**                    non-decreasing; payloads_len = ends[n-1]
**   types            n frame types
**   flags            n flag bytes, or NULL for all zero
**   raw_lens         n decompressed lengths, or NULL (= stored lengths)
**   cur, written     as for tl_encode, advanced over the whole batch
**
** All or nothing: the batch is validated completely before any frame is
** written, so on failure the cursor is unchanged and *written is 0.
** Returns the statuses of tl_encode; TL_INVALID_ARG also for decreasing
** ends or ends[n-1] != payloads_len.  n == 0 is TL_OK with nothing written.
*/
int tl_encode_batch(uint8_t *out, size_t out_cap, uint64_t key, const uint8_t *payloads,
                    size_t payloads_len, const uint64_t *ends, const uint8_t *types,
                    const uint8_t *flags, const uint32_t *raw_lens, size_t n, struct tl_cursor *cur,
                    size_t *written);

/*
** Return 1 when buf[0..len) is exactly one MessagePack value that JSON can
** say -- no bin, ext or 0xC1, no NaN or infinity, map keys str only -- its
** containers nested less than max_depth deep (the value itself at depth 0;
** at most 128 is honoured), else 0.  Text is not decoded.  The rules are
** tabled at the top of tl_json.c.  buf may be NULL when len is 0.
*/
int tl_json_ok(const uint8_t *buf, size_t len, uint32_t max_depth);

/*
** Encode n EVENT frames (flags 0: stored as given) in one call, checking
** each payload against the JSON rules first, and hash the frames as one
** chunk row body (FORMAT.md 7) -- the whole of an append's framing.
**
**   payloads, ends   as for tl_encode_batch; ends may be NULL when n == 1
**                    (the one payload is payloads[0..payloads_len))
**   json_depth       0: no JSON check; otherwise every payload must be one
**                    MessagePack value JSON can say (no bin, ext, NaN,
**                    infinity or non-str map key), its containers nested
**                    less than json_depth deep (at most 128 is honoured)
**   cur, written     as for tl_encode_batch
**   body_check       OUT: XXH3-64 of out[0..*written), seeded with
**                    (key + first seq) mod 2^64: the body check of these
**                    frames stored as one uncompressed chunk row
**   failed           OUT: on TL_NOT_JSON or TL_TOO_LARGE, the index of the
**                    first payload refused; 0 otherwise
**
** All or nothing, validated before anything is written.  Returns TL_OK,
** TL_NOT_JSON, TL_TOO_LARGE (a payload over TL_MAX_STORED),
** TL_BUFFER_TOO_SMALL, or TL_INVALID_ARG (NULL pointers, bad ends, a seq
** range past TL_MAX_SEQ).  n == 0 is TL_OK with nothing written.
*/
int tl_encode_events(uint8_t *out, size_t out_cap, uint64_t key, const uint8_t *payloads,
                     size_t payloads_len, const uint64_t *ends, size_t n, uint32_t json_depth,
                     struct tl_cursor *cur, size_t *written, uint64_t *body_check, size_t *failed);

/*
** Parse the header at buf[0..) without verifying any checksum (the key is
** not needed), for tools that inspect damaged logs.
**
** Returns TL_OK and fills *frame (offset 0); TL_TRUNCATED when buf_len <
** TL_HEADER_SIZE; TL_BAD_MAGIC; then the range checks of FORMAT.md 5.3:
** TL_BAD_FIELD (type 0, ZSTD_DICT without ZSTD, a length over its limit, an
** uncompressed frame whose raw_len differs from stored_len, seq over
** TL_MAX_SEQ) or TL_UNSUPPORTED (mandatory type or flag of a newer
** version).  *frame is written only on TL_OK.
*/
int tl_decode_header(const uint8_t *buf, size_t buf_len, struct tl_frame *frame);

/*
** Verify frames of buf starting at cur->offset, in the order of FORMAT.md
** section 5, and stop at the first defect.
**
**   buf, buf_len     the log bytes; offset 0 is assumed to be 512-aligned in
**                    the underlying file (it matters only for the hint)
**   key              the session key of the frames in buf
**   cur              IN/OUT: advanced past every frame that verified; on a
**                    defect it is left at the failing frame's first byte
**   frames           OUT: array for up to frames_cap decoded headers, or
**                    NULL to verify without recording
**   frames_cap       with frames: array capacity; without: the maximum
**                    number of frames to verify in this call (SIZE_MAX for
**                    all).  0 returns TL_MORE at once unless at the end.
**   n_frames         OUT: frames verified by this call
**   hints            OUT, may be NULL: TL_HINT_* bits describing the defect
**
** Returns TL_END when the cursor reaches buf_len exactly at a frame
** boundary, TL_MORE when frames_cap frames were verified first, otherwise
** the status of the first defect (TL_TRUNCATED ... TL_BAD_CHAIN).  A defect
** never moves the cursor, so a caller may call again with a longer buffer
** (the tail grew) and resume where it stopped.  Returns TL_INVALID_ARG when
** cur->offset > buf_len or is not 8-aligned, or a needed pointer is NULL.
*/
int tl_scan(const uint8_t *buf, size_t buf_len, uint64_t key, struct tl_cursor *cur,
            struct tl_frame *frames, size_t frames_cap, size_t *n_frames, uint32_t *hints);

/*
** tl_scan, with step 8 of FORMAT.md section 5 (the payload check) only for
** the frames whose seq is in [check_lo, check_hi]; every other step -- the
** header check, fields, seq, padding and chain -- runs for every frame.
** For a reader that has just verified a chunk row's body check (which covers
** every byte of buf) and hands out only the payloads of that range: the
** payloads it returns are still checked, the others are never read.  Never
** use it on bytes no body check covered.  tl_scan(...) is
** tl_scan_some(..., 0, UINT64_MAX).
*/
int tl_scan_some(const uint8_t *buf, size_t buf_len, uint64_t key, struct tl_cursor *cur,
                 struct tl_frame *frames, size_t frames_cap, size_t *n_frames, uint32_t *hints,
                 uint64_t check_lo, uint64_t check_hi);

/*
** Search buf for a later frame that proves a defect is not a torn tail
** (a "hole"): the first 8-aligned offset >= from that starts with the magic,
** whose header check verifies under key, and whose seq >= min_seq.
**
** Returns TL_OK and sets *found to its offset, or TL_END when there is none.
** TL_INVALID_ARG when a needed pointer is NULL.  from need not be aligned;
** the search starts at the next 8-aligned offset.
*/
int tl_find_frame(const uint8_t *buf, size_t buf_len, uint64_t key, uint64_t from, uint64_t min_seq,
                  uint64_t *found);

/*
** Return a static, NUL-terminated English description of a status code, or
** "unknown status" for a value outside the list.  Never NULL.
*/
const char *tl_strerror(int status);

/* cdef-end */

#endif /* TL_H */
