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

static inline uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
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
