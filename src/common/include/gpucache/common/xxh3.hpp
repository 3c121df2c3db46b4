// XXH3 from Debian's libxxhash, on the widest vector unit the CPU has. The library's plain
// functions are built for SSE2; its x86 dispatch functions pick AVX-512, AVX2 or SSE2 at run time
// and hash 1 GiB several times faster. Every variant computes the same hash, so files written by
// one are checked by any other. Include this instead of <xxhash.h>.
#pragma once

#include <xxhash.h>

// Not where xxHash is compiled in (XXH_INLINE_ALL): the dispatch functions live in the shared
// library only.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(XXH_INLINE_ALL) && \
    __has_include(<xxh_x86dispatch.h>)
// Redefines XXH3_64bits, XXH3_64bits_update, ... as their *_dispatch versions.
#include <xxh_x86dispatch.h>
#endif
