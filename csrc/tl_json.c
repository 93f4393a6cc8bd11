/*
** tl_json.c -- the JSON rules of event data, checked on its MessagePack bytes.
**
** An event payload (FORMAT.md, "Event payload") is one MessagePack value
** written by msgspec.  MessagePack can carry more than JSON can: binary
** strings, extension types (timestamps), maps keyed by integers, NaN and
** the infinities.  trajlog stores only what JSON can say, so the writer
** checks every payload before it is framed.  Doing that here, on the bytes
** the encoder already produced, replaces a Python walk over the caller's
** objects (about as long as the encode itself) with a pass over a few
** hundred bytes that are about to be hashed anyway.
**
** THE RULES (the same as trajlog.events.check_json, restated on bytes;
** _kernel_py.json_ok is the reference implementation)
**
**   byte(s)          MessagePack type       verdict
**   00-7f e0-ff      fixint                 ok
**   c0 c2 c3         nil, false, true       ok
**   cc-cf d0-d3      uint/int 8..64         ok (every MessagePack int fits
**                                           64 bits; msgspec refuses larger
**                                           Python ints before we run)
**   ca cb            float 32/64            ok unless NaN or infinite
**   a0-bf d9 da db   str                    ok; the text is not decoded
**                                           (msgspec writes UTF-8 only, and
**                                           every reader decodes with checks)
**   90-9f dc dd      array                  ok if every item is
**   80-8f de df      map                    ok if every key is a str and
**                                           every value is ok
**   c4-c6            bin                    refused
**   c7-c9 d4-d8      ext                    refused
**   c1               never used             refused
**
** A container (array or map) at depth >= max_depth is refused, the value
** itself being at depth 0; and the value must fill the buffer exactly: no
** truncated item, no trailing byte.
**
** The walk keeps no stack of its own: a container pushes the count of
** items still owed onto a fixed array indexed by depth, which max_depth
** bounds.  It never reads outside buf[0..len), whatever the bytes are; the
** differential tests and the fuzz corpus hold it to the Python reference.
*/
#include "tl_internal.h"

/* Deepest nesting any caller may ask for (events use 65: the payload array
** holds the data at depth 1, and data may nest 64 deep). */
#define JSON_MAX_DEPTH 128

/* Big-endian loads: MessagePack's lengths, unlike the frame fields. */
static inline uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const uint8_t *p) { return (be16(p) << 16) | be16(p + 2); }

/* True when the IEEE-754 bits hold a finite number (exponent not all ones). */
static inline int finite32(const uint8_t *p) { return (be16(p) & 0x7F80u) != 0x7F80u; }
static inline int finite64(const uint8_t *p) { return (be16(p) & 0x7FF0u) != 0x7FF0u; }

int tl_json_ok(const uint8_t *buf, size_t len, uint32_t max_depth) {
    /* owed[d]: items still to read in the open container at depth d (a map
    ** owes two per entry, key first: an even count means a key is next). */
    uint64_t owed[JSON_MAX_DEPTH + 1];
    uint8_t is_map[JSON_MAX_DEPTH + 1];
    size_t pos = 0;
    uint32_t depth = 0; /* containers open */
    if (buf == NULL && len > 0) return 0;
    if (max_depth > JSON_MAX_DEPTH) max_depth = JSON_MAX_DEPTH;
    for (;;) {
        uint8_t b;
        uint64_t skip = 0;  /* bytes after the type byte this item takes (64 bits: no wrap) */
        uint64_t items = 0; /* for a container: its items (a map: 2 per entry) */
        int open = 0, map = 0;
        if (pos >= len) return 0; /* an item is owed but the bytes ended */
        b = buf[pos++];
        /* A key must be a str: the type byte tells before anything else. */
        if (depth > 0 && is_map[depth] && owed[depth] % 2 == 0) {
            if (!((b >= 0xA0 && b <= 0xBF) || (b >= 0xD9 && b <= 0xDB))) return 0;
        }
        if (b <= 0x7F || b >= 0xE0 || b == 0xC0 || b == 0xC2 || b == 0xC3) {
            skip = 0;
        } else if (b >= 0xA0 && b <= 0xBF) {
            skip = b & 0x1Fu;
        } else if (b >= 0x90 && b <= 0x9F) {
            open = 1, items = b & 0x0Fu;
        } else if (b >= 0x80 && b <= 0x8F) {
            open = map = 1, items = 2 * (uint64_t)(b & 0x0Fu);
        } else {
            /* The rest carry a length or a value in the next bytes. */
            size_t left = len - pos;
            switch (b) {
            case 0xCC:
            case 0xD0:
                skip = 1;
                break;
            case 0xCD:
            case 0xD1:
                skip = 2;
                break;
            case 0xCE:
            case 0xD2:
                skip = 4;
                break;
            case 0xCF:
            case 0xD3:
                skip = 8;
                break;
            case 0xCA:
                if (left < 4 || !finite32(buf + pos)) return 0;
                skip = 4;
                break;
            case 0xCB:
                if (left < 8 || !finite64(buf + pos)) return 0;
                skip = 8;
                break;
            case 0xD9:
                if (left < 1) return 0;
                skip = 1 + (uint64_t)buf[pos];
                break;
            case 0xDA:
                if (left < 2) return 0;
                skip = 2 + (uint64_t)be16(buf + pos);
                break;
            case 0xDB:
                if (left < 4) return 0;
                skip = 4 + (uint64_t)be32(buf + pos);
                break;
            case 0xDC:
            case 0xDE:
                if (left < 2) return 0;
                items = be16(buf + pos), skip = 2, open = 1, map = b == 0xDE;
                break;
            case 0xDD:
            case 0xDF:
                if (left < 4) return 0;
                items = be32(buf + pos), skip = 4, open = 1, map = b == 0xDF;
                break;
            default: /* bin, ext and the unused 0xC1 */
                return 0;
            }
            if (map) items *= 2;
        }
        if (skip > (uint64_t)(len - pos)) return 0;
        pos += (size_t)skip;
        if (depth > 0) owed[depth] -= 1; /* this item is read (a container: begun) */
        if (open) {
            if (depth >= max_depth) return 0; /* this container sits at depth `depth` */
            /* Each item takes at least one byte: a count the bytes cannot
            ** hold is refused now (it also bounds every count below). */
            if (items > (uint64_t)(len - pos)) return 0;
            depth += 1;
            owed[depth] = items;
            is_map[depth] = (uint8_t)map;
        }
        /* Close every container that got all its items. */
        while (depth > 0 && owed[depth] == 0) depth -= 1;
        if (depth == 0) return pos == len;
    }
}
