/*
** tl_internal.h -- helpers shared by the frame encoder and the scanner.
**
** Everything here is static inline so that nothing leaks out of the
** translation units that include it.  Byte order is always explicit: fields
** are assembled and taken apart byte by byte (compilers turn these into
** single loads and stores), never by casting a pointer to a wider type, so
** the code is free of alignment and strict-aliasing assumptions and gives
** the same bytes on a big-endian host.
*/
#ifndef TL_INTERNAL_H
#define TL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tl.h"
#include "tl_xxh3.h"

/* Byte offsets of the header fields (FORMAT.md section 2.1). */
#define OFF_MAGIC 0
#define OFF_TYPE 2
#define OFF_FLAGS 3
#define OFF_STORED 4
#define OFF_RAW 8
#define OFF_HCHECK 12
#define OFF_SEQ 16
#define OFF_PCHECK 24
#define OFF_CHAIN 32

#define MAGIC0 0xA7
#define MAGIC1 0xF1

/* ------------------------------------------------------------------------
** Layouts the Python side relies on.
**
** The Python code reads these bytes and structs with its own hard-coded
** offsets and struct formats, not through the C declarations, so a layout
** change that compiles cleanly here would still make Python misread every
** frame.  Each assertion names the Python code (under src/trajlog/) that
** depends on it: change that code, FORMAT.md and the assertion together.
** They live here, not in tl.h, because cffi cannot parse _Static_assert;
** tl_frame.c and tl_scan.c include this file, so every build checks them.
*/

/* True when member m of struct s has exactly type t. */
#define TL__HAS_TYPE(s, m, t) _Generic(((struct s *)0)->m, t : 1, default : 0)

/* The 40-byte header, field by field: _kernel_py._HEADER "<2sBBIIIQQQ",
** _kernel_py._PREFIX "<2sBBII" (bytes 0..12) and _MID "<QQ" (16..32),
** _format.HEADER_SIZE and _format.MAGIC; tests/kits/framekit.py forges the same. */
_Static_assert(TL_HEADER_SIZE == 40, "_format.HEADER_SIZE, _kernel_py._HEADER: 40 bytes");
_Static_assert(OFF_MAGIC == 0 && MAGIC0 == 0xA7 && MAGIC1 == 0xF1, "_format.MAGIC at 0");
_Static_assert(OFF_TYPE == 2 && OFF_FLAGS == 3, "_kernel_py._HEADER: type, flags u8 at 2, 3");
_Static_assert(OFF_STORED == 4 && OFF_RAW == 8, "_kernel_py._HEADER: stored/raw_len u32 at 4, 8");
_Static_assert(OFF_HCHECK == 12, "_kernel_py._HEADER: hdr_check u32 at 12");
_Static_assert(OFF_SEQ == 16 && OFF_PCHECK == 24, "_kernel_py._HEADER: seq, payload_check u64");
/* codec's split_frames takes each chain from blob[pos + 32:pos + 40]. */
_Static_assert(OFF_CHAIN == 32 && OFF_CHAIN + 8 == TL_HEADER_SIZE, "chain u64 at bytes 32..40");

/* What the checks cover: _kernel_py._header_check hashes header[0:12] +
** header[16:40] and _chain_of header[0:12] + header[16:32], as do
** header_check() and chain_of() below; hdr_check must be the only gap. */
_Static_assert(OFF_HCHECK + 4 == OFF_SEQ, "hdr_check is the 4-byte gap at 12..16");
_Static_assert(OFF_PCHECK + 8 == OFF_CHAIN, "the chain covers bytes 16..32: seq, payload_check");

/* Frame sizes: HEADER_SIZE + n + (-n & 7) in _format.frame_size,
** FrameHeader.size and codec's split_frames; _kernel_c.encode_batch
** allocates payload + 47 bytes per frame (header plus at most 7 of pad). */
_Static_assert(TL_ALIGN == 8 && TL_HEADER_SIZE % TL_ALIGN == 0, "`-n & 7` pads to 8");
_Static_assert(TL_HEADER_SIZE + TL_ALIGN - 1 == 47, "_kernel_c: at most 47 bytes per frame");
/* FORMAT.md 2: no 8-byte field straddles a sector, which both kernels'
** zero-sector hint (_kernel_py._has_zero_sector) takes for granted. */
_Static_assert(TL_SECTOR % TL_ALIGN == 0, "_format.SECTOR is a multiple of ALIGN");

/* Field widths: lengths are u32 (`I` in _kernel_c._FRAME and _kernel_py._HEADER;
** _format.encode_args_ok bounds raw_lens by 0xFFFFFFFF); seqs are stored as
** SQLite INTEGERs, hence _format.MAX_SEQ = 2**63 - 1. */
_Static_assert(TL_MAX_STORED <= UINT32_MAX && TL_MAX_RAW <= UINT32_MAX, "lengths fit u32");
_Static_assert(TL_MAX_SEQ == INT64_MAX, "_format.MAX_SEQ is 2**63 - 1");

/* struct tl_frame: _kernel_c._FRAME = struct.Struct("=QQQQIIBB6x") unpacks
** it from raw bytes into _format.FrameHeader (same field order) and walks
** arrays of it with a 48-byte stride (iter_unpack); "=" means no padding. */
_Static_assert(sizeof(struct tl_frame) == 48, "_kernel_c._FRAME.size is 48");
_Static_assert(offsetof(struct tl_frame, offset) == 0, "_kernel_c._FRAME: offset");
_Static_assert(offsetof(struct tl_frame, seq) == 8, "_kernel_c._FRAME: seq");
_Static_assert(offsetof(struct tl_frame, payload_check) == 16, "_kernel_c._FRAME: payload_check");
_Static_assert(offsetof(struct tl_frame, chain) == 24, "_kernel_c._FRAME: chain");
_Static_assert(offsetof(struct tl_frame, stored_len) == 32, "_kernel_c._FRAME: stored_len");
_Static_assert(offsetof(struct tl_frame, raw_len) == 36, "_kernel_c._FRAME: raw_len");
_Static_assert(offsetof(struct tl_frame, type) == 40, "_kernel_c._FRAME: type");
_Static_assert(offsetof(struct tl_frame, flags) == 41, "_kernel_c._FRAME: flags");
_Static_assert(offsetof(struct tl_frame, reserved) == 42, "_kernel_c._FRAME: 6x reserved");
_Static_assert(sizeof(((struct tl_frame *)0)->reserved) == 6, "_kernel_c._FRAME: 6x reserved");
_Static_assert(TL__HAS_TYPE(tl_frame, offset, uint64_t) && TL__HAS_TYPE(tl_frame, seq, uint64_t) &&
                   TL__HAS_TYPE(tl_frame, payload_check, uint64_t) &&
                   TL__HAS_TYPE(tl_frame, chain, uint64_t),
               "_kernel_c._FRAME: QQQQ");
_Static_assert(TL__HAS_TYPE(tl_frame, stored_len, uint32_t) &&
                   TL__HAS_TYPE(tl_frame, raw_len, uint32_t),
               "_kernel_c._FRAME: II");
_Static_assert(TL__HAS_TYPE(tl_frame, type, uint8_t) && TL__HAS_TYPE(tl_frame, flags, uint8_t),
               "_kernel_c._FRAME: BB");

/* struct tl_cursor: _kernel_c assigns it field by field through cffi
** (cur.offset, cur.next_seq, cur.chain = cursor), in the order of
** _format.Cursor, with values up to 2**64 - 1 (_format.encode_args_ok);
** the fuzz targets initialise it positionally in that order. */
_Static_assert(sizeof(struct tl_cursor) == 24, "struct tl_cursor: three u64, no padding");
_Static_assert(offsetof(struct tl_cursor, offset) == 0 &&
                   offsetof(struct tl_cursor, next_seq) == 8 &&
                   offsetof(struct tl_cursor, chain) == 16,
               "_format.Cursor order: offset, next_seq, chain");
_Static_assert(TL__HAS_TYPE(tl_cursor, offset, uint64_t) &&
                   TL__HAS_TYPE(tl_cursor, next_seq, uint64_t) &&
                   TL__HAS_TYPE(tl_cursor, chain, uint64_t),
               "_format.encode_args_ok: cursor fields are u64");

static inline uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t ld64(const uint8_t *p) {
    return (uint64_t)ld32(p) | ((uint64_t)ld32(p + 4) << 32);
}

static inline void st32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void st64(uint8_t *p, uint64_t v) {
    st32(p, (uint32_t)v);
    st32(p + 4, (uint32_t)(v >> 32));
}

/* Zero bytes that follow a payload of n bytes to reach an 8-byte boundary. */
static inline size_t pad_of(size_t n) { return (size_t)(0u - n) & 7u; }

/*
** hdr_check = low 32 bits of XXH3-64(h[0..12) || h[16..40), seed = key).
** It covers every header byte except itself, chain included, so a header
** that passes can be trusted for its lengths before anything else is read.
*/
static inline uint32_t header_check(const uint8_t *h, uint64_t key) {
    uint8_t tmp[36];
    memcpy(tmp, h, 12);
    memcpy(tmp + 12, h + 16, 24);
    return (uint32_t)tl__xxh3_64(tmp, sizeof tmp, key);
}

/*
** chain = XXH3-64(h[0..12) || h[16..32), seed = previous chain).  It leaves
** out hdr_check (derived) and the chain itself, and covers type, flags,
** lengths, seq and payload_check -- hence, transitively, every payload and
** every earlier frame of the log.
*/
static inline uint64_t chain_of(const uint8_t *h, uint64_t prev) {
    uint8_t tmp[28];
    memcpy(tmp, h, 12);
    memcpy(tmp + 12, h + 16, 16);
    return tl__xxh3_64(tmp, sizeof tmp, prev);
}

/* TL_OK for a type this version reads, TL_BAD_FIELD for the never-valid 0,
** TL_UNSUPPORTED for a mandatory type from a newer version. */
static inline int type_status(uint32_t type) {
    if (type == 0) return TL_BAD_FIELD;
    if (type <= TL_TYPE_CHUNK || (type >= TL_TYPE_OPTIONAL_MIN && type <= 0xFF)) return TL_OK;
    return TL_UNSUPPORTED;
}

/*
** Range checks on a header whose hdr_check already verified (tl_frame.c).
** Order: type, flags, lengths, seq range.  Returns TL_OK, TL_BAD_FIELD or
** TL_UNSUPPORTED.  h must hold TL_HEADER_SIZE readable bytes.
*/
int tl__check_fields(const uint8_t *h);

/* Copy the fields of the header at h into *f, with f->offset = offset. */
void tl__read_header(const uint8_t *h, uint64_t offset, struct tl_frame *f);

#endif /* TL_INTERNAL_H */
