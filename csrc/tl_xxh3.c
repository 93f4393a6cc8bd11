/*
** tl_xxh3.c -- XXH3-64 with a seed, implemented from the specification.
**
** Every frame checksum in trajlog is XXH3-64 (FORMAT.md).  This file is an
** independent implementation of that function, written from the public
** document "xxHash fast digest algorithm" (doc/xxhash_spec.md in the
** Cyan4973/xxHash repository), sections "XXH3 Algorithm Overview" through
** "XXH3 Algorithm Description (for large inputs)".  No code was taken from
** the reference library.  The prime constants and the 192-byte default
** secret below are the values the specification defines; the output must
** match the reference XXH3_64bits_withSeed() bit for bit, and the test
** script compares the two over every size class.
**
** XXH3 is really four hash functions selected by input length.  All of
** them read the input and the secret as little-endian 64-bit (sometimes
** 32-bit) words and finish with a multiply/xor-shift "avalanche":
**
**   len == 0       The seed xor two secret words, through the XXH64 final
**                  mix.  No input is read.
**
**   len 1..3       The first, middle and last byte plus the length are
**                  packed into one 32-bit word, xored with a seeded secret
**                  word, then the XXH64 final mix.
**
**   len 4..8       The first and last 4 bytes (they overlap when len < 8)
**                  form one 64-bit word; two rotations, two multiplies by
**                  a mixing prime, with the length folded in between.
**
**   len 9..16      The first and last 8 bytes (overlapping again), each
**                  xored with seeded secret words, multiplied together to
**                  128 bits and folded back to 64 bits.
**
**   len 17..128    The input is covered by 16-byte chunks taken in pairs,
**                  one from the front and one from the back, so that
**                  every byte is read at least once without a tail loop.
**                  Each chunk is "mixed": its two words are xored with
**                  seeded secret words and multiplied to a 128-bit product
**                  that is folded (low xor high).  The folds are summed
**                  into an accumulator that starts at len * PRIME64_1.
**
**   len 129..240   The same mix on consecutive 16-byte chunks: the first
**                  eight chunks, an intermediate avalanche, the remaining
**                  whole chunks with the secret shifted by 3 bytes, and
**                  finally the last 16 bytes of input (which may overlap
**                  the previous chunk).
**
**   len > 240      The long hash.  Eight 64-bit accumulators are fed with
**                  64-byte "stripes".  Per stripe and per lane i:
**                      m = data[i] ^ secret[i]
**                      acc[i]   += low32(m) * high32(m)
**                      acc[i^1] += data[i]
**                  The secret window slides 8 bytes per stripe; 16 stripes
**                  (1024 bytes, fixed by the 192-byte secret) make a
**                  "block", after which each accumulator is "scrambled"
**                  (xor-shift, xor with the last 64 secret bytes, multiply
**                  by PRIME32_1).  The final partial block is accumulated
**                  without a scramble, the last 64 input bytes are
**                  accumulated once more as a stripe of their own against
**                  a fixed secret offset, and the eight accumulators are
**                  merged pairwise with 128-bit multiplies into one value.
**                  A non-zero seed does not enter the long hash directly:
**                  it derives a private secret instead (add the seed to
**                  the even 64-bit words of the default secret, subtract
**                  it from the odd ones).
**
** Only the long hash is worth vectorising; it is where the bytes are.  Its
** stripe step is written three ways, all computing the same thing:
**
**   scalar   portable C, always compiled; forced by -DTL_XXH3_SCALAR so
**            the tests can check it on x86 as well.
**   SSE2     128-bit vectors, two lanes each.  SSE2 is part of the x86-64
**            baseline, so this is the normal path on that architecture.
**   AVX2     256-bit vectors, four lanes each; only when the compiler was
**            told it may use AVX2 (-mavx2 / -march=...).  There is no
**            run-time CPU dispatch on purpose: one binary, one code path.
**
** -DTL_XXH3_NO_INT128 forces the portable 64x64->128 multiply so that it,
** too, can be tested on hosts that have unsigned __int128.
**
** Byte order: every multi-byte read goes through rd32()/rd64(), which
** build the value from little-endian bytes, so a big-endian host gives the
** same hashes.  The vector paths exist only on x86, which is little-endian,
** so their lane layout equals the little-endian word order.  No pointer to
** the input is ever cast to a wider type: the input has no alignment
** guarantee (frames sit at arbitrary offsets in a mapped file).
*/
#include "tl_xxh3.h"

#include <string.h>

#if !defined(TL_XXH3_SCALAR) && defined(__AVX2__)
#define TL_XXH3_USE_AVX2 1
#include <immintrin.h>
#elif !defined(TL_XXH3_SCALAR) && defined(__SSE2__)
#define TL_XXH3_USE_SSE2 1
#include <emmintrin.h>
#endif

/* Constants defined by the specification. */
#define PRIME32_1 0x9E3779B1u
#define PRIME32_2 0x85EBCA77u
#define PRIME32_3 0xC2B2AE3Du
#define PRIME64_1 0x9E3779B185EBCA87u
#define PRIME64_2 0xC2B2AE3D27D4EB4Fu
#define PRIME64_3 0x165667B19E3779F9u
#define PRIME64_4 0x85EBCA77C2B2AE63u
#define PRIME64_5 0x27D4EB2F165667C5u
#define PRIME_MX1 0x165667919E3779F9u
#define PRIME_MX2 0x9FB21C651E98DF25u

#define SECRET_SIZE 192                                                 /* the default secret */
#define STRIPE_LEN 64                                                   /* 8 lanes of 8 bytes */
#define SECRET_ADVANCE 8                                                /* per stripe */
#define STRIPES_PER_BLOCK ((SECRET_SIZE - STRIPE_LEN) / SECRET_ADVANCE) /* 16 */
#define BLOCK_LEN (STRIPE_LEN * STRIPES_PER_BLOCK)                      /* 1024 */
#define SCRAMBLE_OFFSET (SECRET_SIZE - STRIPE_LEN)                      /* last 64 secret bytes */
#define LAST_STRIPE_OFFSET (SECRET_SIZE - STRIPE_LEN - 7)
#define MERGE_OFFSET 11
#define MID_TAIL_OFFSET (136 - 17) /* 129..240: secret for the last chunk */
#define MID_SHIFT 3                /* 129..240: secret shift after chunk 8 */

static const uint8_t kSecret[SECRET_SIZE] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

/* ------------------------------------------------------------------------
** Word access and bit operations.
*/

/*
** Little-endian loads.  On a host known to be little-endian a memcpy is a
** single unaligned load; anywhere else the value is assembled from bytes,
** which is correct on any byte order (and compilers still recognise it).
*/
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
#else
static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}
#endif

static inline uint32_t bswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0x0000FF00u) | ((x << 8) & 0x00FF0000u) | (x << 24);
}

static inline uint64_t bswap64(uint64_t x) {
    return ((uint64_t)bswap32((uint32_t)x) << 32) | bswap32((uint32_t)(x >> 32));
}

/* Callers pass 0 < r < 64 only, so neither shift is by 64 (undefined). */
static inline uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

/*
** The full 64x64 -> 128-bit product, folded to 64 bits as low xor high.
** XXH3-64 only ever uses its 128-bit products in this folded form (9..16,
** the 17..240 chunk mix and the long-hash merge).
*/
#if defined(__SIZEOF_INT128__) && !defined(TL_XXH3_NO_INT128)
/* __extension__ keeps -Wpedantic quiet about the non-ISO type. */
__extension__ typedef unsigned __int128 tl_u128;

static inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
    tl_u128 p = (tl_u128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
}
#else
/*
** Schoolbook multiplication on 32-bit halves.  The middle sum cannot
** overflow: its largest value is (2^32-1)^2 + 2*(2^32-1) = 2^64-1.
*/
static inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
    uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
    uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    uint64_t ll = a_lo * b_lo;
    uint64_t hl = a_hi * b_lo;
    uint64_t lh = a_lo * b_hi;
    uint64_t hh = a_hi * b_hi;
    uint64_t mid = (ll >> 32) + (hl & 0xFFFFFFFFu) + lh;
    uint64_t hi = hh + (hl >> 32) + (mid >> 32);
    uint64_t lo = (mid << 32) | (ll & 0xFFFFFFFFu);
    return lo ^ hi;
}
#endif

/* The XXH64 final mix, used by XXH3 for inputs of 0..3 bytes. */
static inline uint64_t avalanche_xxh64(uint64_t x) {
    x ^= x >> 33;
    x *= PRIME64_2;
    x ^= x >> 29;
    x *= PRIME64_3;
    x ^= x >> 32;
    return x;
}

/* The shorter XXH3 final mix, used from 9 bytes up. */
static inline uint64_t avalanche_xxh3(uint64_t x) {
    x ^= x >> 37;
    x *= PRIME_MX1;
    x ^= x >> 32;
    return x;
}

/* ------------------------------------------------------------------------
** Inputs of 0..16 bytes.  Each reads a fixed secret window with the seed
** applied directly; the seed never derives a secret below 241 bytes.
*/

static uint64_t hash_0(const uint8_t *k, uint64_t seed) {
    return avalanche_xxh64(seed ^ rd64(k + 56) ^ rd64(k + 64));
}

static uint64_t hash_1to3(const uint8_t *p, size_t len, const uint8_t *k, uint64_t seed) {
    /* For len 1 all three bytes are p[0]; for len 2 middle == last. */
    uint32_t packed = (uint32_t)p[len - 1] | ((uint32_t)len << 8) | ((uint32_t)p[0] << 16) |
                      ((uint32_t)p[len >> 1] << 24);
    uint64_t flip = (uint64_t)(rd32(k) ^ rd32(k + 4)) + seed;
    return avalanche_xxh64(flip ^ packed);
}

static uint64_t hash_4to8(const uint8_t *p, size_t len, const uint8_t *k, uint64_t seed) {
    /* The seed's low half, byte-reversed, is mixed into its high half. */
    uint64_t s = seed ^ ((uint64_t)bswap32((uint32_t)seed) << 32);
    uint64_t first = rd32(p);
    uint64_t last = rd32(p + len - 4);
    uint64_t flip = (rd64(k + 8) ^ rd64(k + 16)) - s;
    uint64_t x = flip ^ (last | (first << 32));
    x ^= rotl64(x, 49) ^ rotl64(x, 24);
    x *= PRIME_MX2;
    x ^= (x >> 35) + (uint64_t)len;
    x *= PRIME_MX2;
    x ^= x >> 28;
    return x;
}

static uint64_t hash_9to16(const uint8_t *p, size_t len, const uint8_t *k, uint64_t seed) {
    uint64_t lo = ((rd64(k + 24) ^ rd64(k + 32)) + seed) ^ rd64(p);
    uint64_t hi = ((rd64(k + 40) ^ rd64(k + 48)) - seed) ^ rd64(p + len - 8);
    uint64_t x = (uint64_t)len + bswap64(lo) + hi + mul128_fold64(lo, hi);
    return avalanche_xxh3(x);
}

/* ------------------------------------------------------------------------
** Inputs of 17..240 bytes: sums of 16-byte chunk mixes.
*/

/* Mix one 16-byte chunk of input with 16 bytes of secret and the seed. */
static inline uint64_t mix16(const uint8_t *p, const uint8_t *k, uint64_t seed) {
    return mul128_fold64(rd64(p) ^ (rd64(k) + seed), rd64(p + 8) ^ (rd64(k + 8) - seed));
}

static uint64_t hash_17to128(const uint8_t *p, size_t len, const uint8_t *k, uint64_t seed) {
    uint64_t acc = (uint64_t)len * PRIME64_1;
    /*
    ** rounds = ceil(len / 32), 1..4.  Round i mixes the i-th chunk from
    ** the front and the i-th from the back; for lengths that are not a
    ** multiple of 32 the two halves overlap in the middle, by design.
    ** The order of the additions does not matter.
    */
    size_t rounds = ((len - 1) >> 5) + 1;
    for (size_t i = 0; i < rounds; i++) {
        acc += mix16(p + 16 * i, k + 32 * i, seed);
        acc += mix16(p + len - 16 - 16 * i, k + 32 * i + 16, seed);
    }
    return avalanche_xxh3(acc);
}

static uint64_t hash_129to240(const uint8_t *p, size_t len, const uint8_t *k, uint64_t seed) {
    uint64_t acc = (uint64_t)len * PRIME64_1;
    size_t chunks = len >> 4; /* 8..15 whole chunks */
    size_t i;
    for (i = 0; i < 8; i++) acc += mix16(p + 16 * i, k + 16 * i, seed);
    /*
    ** Chunks past the eighth reuse the secret from the start, shifted by
    ** 3 bytes; the avalanche in between keeps them from cancelling.
    */
    acc = avalanche_xxh3(acc);
    for (i = 8; i < chunks; i++) acc += mix16(p + 16 * i, k + 16 * (i - 8) + MID_SHIFT, seed);
    acc += mix16(p + len - 16, k + MID_TAIL_OFFSET, seed);
    return avalanche_xxh3(acc);
}

/* ------------------------------------------------------------------------
** Inputs of 241 bytes and more: the striped long hash.
**
** Each path provides two functions over an array of eight uint64_t
** accumulators, held in registers while they run:
**
**   accumulate(acc, p, k, n)   feed n consecutive stripes starting at p,
**                              stripe j using secret bytes k + 8*j
**   scramble(acc, k)           the end-of-block scramble, k = 64 bytes
*/

#if defined(TL_XXH3_USE_AVX2)

/*
** AVX2: each 256-bit vector holds four lanes.  _mm256_mul_epu32 multiplies
** the low 32 bits of each 64-bit lane, so the high halves are first moved
** down with an in-lane shuffle; the lane swap acc[i^1] += data[i] is a
** shuffle of 32-bit pairs inside each 128-bit half.
*/
static inline __m256i avx2_stripe_half(__m256i acc, const uint8_t *p, const uint8_t *k) {
    __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i m = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(const void *)k));
    __m256i m_hi = _mm256_shuffle_epi32(m, _MM_SHUFFLE(0, 3, 0, 1));
    __m256i prod = _mm256_mul_epu32(m, m_hi);
    __m256i swapped = _mm256_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2));
    return _mm256_add_epi64(acc, _mm256_add_epi64(prod, swapped));
}

static void accumulate(uint64_t acc[8], const uint8_t *p, const uint8_t *k, size_t n) {
    __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)acc);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 4));
    for (size_t j = 0; j < n; j++) {
        const uint8_t *s = p + j * STRIPE_LEN, *ks = k + j * SECRET_ADVANCE;
        a0 = avx2_stripe_half(a0, s, ks);
        a1 = avx2_stripe_half(a1, s + 32, ks + 32);
    }
    _mm256_storeu_si256((__m256i *)(void *)acc, a0);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 4), a1);
}

/* a * PRIME32_1 mod 2^64 = lo32(a)*P + (hi32(a)*P << 32), P < 2^32. */
static inline __m256i avx2_scramble_half(__m256i a, const uint8_t *k) {
    const __m256i prime = _mm256_set1_epi64x(PRIME32_1); /* high dwords 0 */
    a = _mm256_xor_si256(a, _mm256_srli_epi64(a, 47));
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(const void *)k));
    __m256i lo = _mm256_mul_epu32(a, prime);
    __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime);
    return _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
}

static void scramble(uint64_t acc[8], const uint8_t *k) {
    __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)acc);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 4));
    _mm256_storeu_si256((__m256i *)(void *)acc, avx2_scramble_half(a0, k));
    _mm256_storeu_si256((__m256i *)(void *)(acc + 4), avx2_scramble_half(a1, k + 32));
}

#elif defined(TL_XXH3_USE_SSE2)

/*
** SSE2: four vectors of two lanes.  The two lanes of a vector are exactly
** a pair {2i, 2i+1} that exchange their raw data words, so the swap is a
** 64-bit lane exchange within the vector.  _mm_mul_epu32 multiplies the
** low 32 bits of each 64-bit lane; shuffling the high halves down first
** gives low32(m) * high32(m) per lane in one instruction.
*/
static inline __m128i sse2_stripe_pair(__m128i acc, const uint8_t *p, const uint8_t *k) {
    __m128i d = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_xor_si128(d, _mm_loadu_si128((const __m128i *)(const void *)k));
    __m128i m_hi = _mm_shuffle_epi32(m, _MM_SHUFFLE(0, 3, 0, 1));
    __m128i prod = _mm_mul_epu32(m, m_hi);
    __m128i swapped = _mm_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2));
    return _mm_add_epi64(acc, _mm_add_epi64(prod, swapped));
}

static void accumulate(uint64_t acc[8], const uint8_t *p, const uint8_t *k, size_t n) {
    __m128i a0 = _mm_loadu_si128((const __m128i *)(const void *)acc);
    __m128i a1 = _mm_loadu_si128((const __m128i *)(const void *)(acc + 2));
    __m128i a2 = _mm_loadu_si128((const __m128i *)(const void *)(acc + 4));
    __m128i a3 = _mm_loadu_si128((const __m128i *)(const void *)(acc + 6));
    for (size_t j = 0; j < n; j++) {
        const uint8_t *s = p + j * STRIPE_LEN, *ks = k + j * SECRET_ADVANCE;
        a0 = sse2_stripe_pair(a0, s, ks);
        a1 = sse2_stripe_pair(a1, s + 16, ks + 16);
        a2 = sse2_stripe_pair(a2, s + 32, ks + 32);
        a3 = sse2_stripe_pair(a3, s + 48, ks + 48);
    }
    _mm_storeu_si128((__m128i *)(void *)acc, a0);
    _mm_storeu_si128((__m128i *)(void *)(acc + 2), a1);
    _mm_storeu_si128((__m128i *)(void *)(acc + 4), a2);
    _mm_storeu_si128((__m128i *)(void *)(acc + 6), a3);
}

/* a * PRIME32_1 mod 2^64 = lo32(a)*P + (hi32(a)*P << 32), P < 2^32. */
static inline __m128i sse2_scramble_pair(__m128i a, const uint8_t *k) {
    const __m128i prime = _mm_set1_epi64x(PRIME32_1); /* high dwords 0 */
    a = _mm_xor_si128(a, _mm_srli_epi64(a, 47));
    a = _mm_xor_si128(a, _mm_loadu_si128((const __m128i *)(const void *)k));
    __m128i lo = _mm_mul_epu32(a, prime);
    __m128i hi = _mm_mul_epu32(_mm_srli_epi64(a, 32), prime);
    return _mm_add_epi64(lo, _mm_slli_epi64(hi, 32));
}

static void scramble(uint64_t acc[8], const uint8_t *k) {
    for (int i = 0; i < 4; i++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(acc + 2 * i));
        _mm_storeu_si128((__m128i *)(void *)(acc + 2 * i), sse2_scramble_pair(a, k + 16 * i));
    }
}

#else /* scalar */

/*
** One pair of lanes {2i, 2i+1}: each lane adds the product of the halves
** of its own data^secret word, plus its neighbour's raw data word.  The
** pairing is what the spec writes as acc[i ^ 1] += data[i].
*/
static inline void scalar_stripe_pair(uint64_t *a, const uint8_t *p, const uint8_t *k) {
    uint64_t d0 = rd64(p), d1 = rd64(p + 8);
    uint64_t m0 = d0 ^ rd64(k), m1 = d1 ^ rd64(k + 8);
    a[0] += d1 + (m0 & 0xFFFFFFFFu) * (m0 >> 32);
    a[1] += d0 + (m1 & 0xFFFFFFFFu) * (m1 >> 32);
}

static void accumulate(uint64_t acc[8], const uint8_t *p, const uint8_t *k, size_t n) {
    /*
    ** Work on a local copy: it cannot alias the input bytes, so the
    ** compiler keeps all eight lanes in registers across the loop.
    */
    uint64_t a[8];
    memcpy(a, acc, sizeof a);
    for (size_t j = 0; j < n; j++) {
        const uint8_t *s = p + j * STRIPE_LEN, *ks = k + j * SECRET_ADVANCE;
        scalar_stripe_pair(a + 0, s, ks);
        scalar_stripe_pair(a + 2, s + 16, ks + 16);
        scalar_stripe_pair(a + 4, s + 32, ks + 32);
        scalar_stripe_pair(a + 6, s + 48, ks + 48);
    }
    memcpy(acc, a, sizeof a);
}

static void scramble(uint64_t acc[8], const uint8_t *k) {
    for (int i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= rd64(k + 8 * i);
        acc[i] = a * PRIME32_1;
    }
}

#endif /* long-hash paths */

static uint64_t hash_long(const uint8_t *p, size_t len, const uint8_t *k) {
    uint64_t acc[8] = {PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3,
                       PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1};
    /*
    ** Whole blocks, each followed by a scramble.  (len - 1) rather than
    ** len: a final block that is exactly full is still treated as the
    ** last, unscrambled block below.  len > 240 here, so len - 1 is safe.
    */
    size_t blocks = (len - 1) / BLOCK_LEN;
    for (size_t b = 0; b < blocks; b++) {
        accumulate(acc, p + b * BLOCK_LEN, k, STRIPES_PER_BLOCK);
        scramble(acc, k + SCRAMBLE_OFFSET);
    }
    /*
    ** The last block (1..1024 bytes): its whole stripes except a stripe
    ** that would end exactly at len, then the final 64 bytes of input as
    ** one more stripe.  The last stripe may overlap bytes already fed;
    ** that is part of the definition.
    */
    size_t tail = len - blocks * BLOCK_LEN;
    accumulate(acc, p + blocks * BLOCK_LEN, k, (tail - 1) / STRIPE_LEN);
    accumulate(acc, p + len - STRIPE_LEN, k + LAST_STRIPE_OFFSET, 1);

    /* Merge: four 128-bit products of secret-keyed accumulator pairs. */
    uint64_t r = (uint64_t)len * PRIME64_1;
    for (int i = 0; i < 4; i++)
        r += mul128_fold64(acc[2 * i] ^ rd64(k + MERGE_OFFSET + 16 * i),
                           acc[2 * i + 1] ^ rd64(k + MERGE_OFFSET + 16 * i + 8));
    return avalanche_xxh3(r);
}

/*
** The seeded long hash's secret: the seed added to the even 64-bit words of
** the default secret and subtracted from the odd ones.  With vectors it is
** written 16 bytes at a time, because the stripe loop reads it back at once
** with 16-byte loads: built from 8-byte stores instead, every such load
** straddles two in-flight stores, store forwarding fails, and a 1.3 KB hash
** took about 1.8x as long (measured).
*/
static void derive_secret(uint8_t out[SECRET_SIZE], uint64_t seed) {
#if defined(TL_XXH3_USE_SSE2) || defined(TL_XXH3_USE_AVX2)
    const uint64_t lanes[2] = {seed, 0 - seed}; /* x86 is little-endian */
    const __m128i add = _mm_loadu_si128((const __m128i *)(const void *)lanes);
    for (size_t i = 0; i < SECRET_SIZE; i += 16) {
        __m128i k = _mm_loadu_si128((const __m128i *)(const void *)(kSecret + i));
        _mm_store_si128((__m128i *)(void *)(out + i), _mm_add_epi64(k, add));
    }
#else
    for (size_t i = 0; i < SECRET_SIZE; i += 8) {
        uint64_t w = rd64(kSecret + i) + ((i & 8) ? 0 - seed : seed);
        for (size_t b = 0; b < 8; b++) out[i + b] = (uint8_t)(w >> (8 * b));
    }
#endif
}

/* ------------------------------------------------------------------------
** Entry point.
*/

uint64_t tl__xxh3_64(const void *data, size_t len, uint64_t seed) {
    const uint8_t *p = (const uint8_t *)data;
    if (len <= 16) {
        if (len > 8) return hash_9to16(p, len, kSecret, seed);
        if (len >= 4) return hash_4to8(p, len, kSecret, seed);
        if (len > 0) return hash_1to3(p, len, kSecret, seed);
        return hash_0(kSecret, seed); /* p may be NULL: not touched */
    }
    if (len <= 128) return hash_17to128(p, len, kSecret, seed);
    if (len <= 240) return hash_129to240(p, len, kSecret, seed);
    if (seed == 0) return hash_long(p, len, kSecret);
    /*
    ** A seeded long hash uses a secret derived from the seed.  Deriving
    ** with seed 0 would reproduce kSecret, hence the shortcut above.  The
    ** 192 bytes live on the stack: no state outlives the call.
    */
    _Alignas(16) uint8_t derived[SECRET_SIZE];
    derive_secret(derived, seed);
    return hash_long(p, len, derived);
}
