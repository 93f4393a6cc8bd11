/*
** tl_xxh3.h -- our own XXH3-64, written from the public xxHash specification.
**
** Internal to the C core (the double underscore marks it as such; the
** library is built with -fvisibility=hidden, so it is not exported).  The
** public entry point is tl_checksum() in tl.h.
*/
#ifndef TL_XXH3_H
#define TL_XXH3_H

#include <stddef.h>
#include <stdint.h>

/*
** Return the 64-bit XXH3 hash of data[0..len) with the given seed, bit for
** bit the value of the reference XXH3_64bits_withSeed().  data may be NULL
** when len is 0.  Any alignment, any length; reentrant, no allocation; the
** same result on little- and big-endian hosts.
*/
uint64_t tl__xxh3_64(const void *data, size_t len, uint64_t seed);

#endif /* TL_XXH3_H */
