#include "spindle_transpose_kernels.h"

#include "spindle_filter_kernels.h"

#include <string.h>

// A 16 × 16 byte transpose is four rounds of unpacks (8-, 16-, 32- and 64-bit elements), each pairing register `i`
// with register `i + 8` into registers `2i` (low halves) and `2i + 1` (high halves). With row `bit_reversed[i]` in
// register `i` before the first round, register `j` holds column `j` after the last; the transpose being its own
// inverse, columns in that order give rows. The baseline variant does it on 16-byte vectors (clang's vector
// extensions: `punpck*` with SSE2, `zip1`/`zip2` with NEON); the AVX2 one on 32-byte vectors whose 128-bit halves
// are the same byte columns of two groups of 16 slab rows, so that one transposed row of both groups is one 32-byte
// store on gather and one 32-byte load on scatter.
//
// The channels do not matter to the transposes: channel `c` of pixel `x` is byte column `x · channels + c`, and its
// transposed row is at `(x · channels + c) · lanes`, so every byte column moves alike. Gather reads its rows from
// memory (the image, seldom in the caches) and waits on those loads more than on anything else; it prefetches each
// row `PREFETCH_DISTANCE` bytes ahead of its loads. (On an AMD EPYC, 12 MP benchmark: 128 or 192 bytes ahead took a
// fifth to a quarter off the gather's samples; 1 KB ahead did not help.) Scatter's stores go to rows of the streaming
// form's ring (megabytes): each call prefetches each of its rows `PREFETCH_DISTANCE` bytes past its block, a few
// blocks ahead of the calls that store there (about a fifth off the scatter's samples). The hint asks for a write
// prefetch, which x86-64 without PRFCHW (not part of the AVX2 target) compiles as a plain `prefetcht0`.

#define TRANSPOSE_INLINE static inline __attribute__((always_inline))

// The loops over the 16 registers of a transpose must be unrolled, or the registers live in memory.
#define UNROLLED _Pragma("clang loop unroll(full)")

#define PREFETCH_DISTANCE 192

// Prefetches the line `PREFETCH_DISTANCE` bytes past `p`: an address that may be past the end of the buffer (a
// prefetch never faults), so it is computed as an integer, not as a pointer.
TRANSPOSE_INLINE void prefetch_read_ahead(const uint8_t *p) {
  __builtin_prefetch((const void *)((uintptr_t)p + PREFETCH_DISTANCE), 0);
}

static const int bit_reversed[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

TRANSPOSE_INLINE intptr_t smaller(intptr_t a, intptr_t b) { return a < b ? a : b; }

// Byte columns `from..<columns` of slab rows `base..<base + count`, one byte at a time.
TRANSPOSE_INLINE void gather_bytes(
  const uint8_t *source, intptr_t rowBytes, intptr_t base, intptr_t count, intptr_t from, intptr_t columns,
  uint8_t *transposed, intptr_t lanes) {
  for (intptr_t i = from; i < columns; i++) {
    uint8_t *lane = transposed + i * lanes + base;
    const uint8_t *column = source + base * rowBytes + i;
    for (intptr_t k = 0; k < count; k++) lane[k] = column[k * rowBytes];
  }
}

#if defined(__clang__)
typedef uint8_t bytes16 __attribute__((vector_size(16)));
typedef uint16_t words8 __attribute__((vector_size(16)));
typedef uint32_t words4 __attribute__((vector_size(16)));
typedef uint64_t words2 __attribute__((vector_size(16)));

TRANSPOSE_INLINE bytes16 load16(const uint8_t *p) {
  bytes16 v;
  memcpy(&v, p, sizeof v);
  return v;
}

TRANSPOSE_INLINE void store16(uint8_t *p, bytes16 v) { memcpy(p, &v, sizeof v); }

// One round of unpacks on the 16 vectors `r`, `LO(a, b)` and `HI(a, b)` giving the low and high interleaves.
#define TRANSPOSE_ROUND(r, LO, HI) \
  do { \
    __typeof__(r[0]) t[16]; \
    UNROLLED for (int i = 0; i < 8; i++) { \
      t[2 * i] = LO(r[i], r[i + 8]); \
      t[2 * i + 1] = HI(r[i], r[i + 8]); \
    } \
    UNROLLED for (int i = 0; i < 16; i++) r[i] = t[i]; \
  } while (0)

TRANSPOSE_INLINE bytes16 lo8(bytes16 a, bytes16 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
TRANSPOSE_INLINE bytes16 hi8(bytes16 a, bytes16 b) {
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}
TRANSPOSE_INLINE bytes16 lo16(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words8)a, (words8)b, 0, 8, 1, 9, 2, 10, 3, 11);
}
TRANSPOSE_INLINE bytes16 hi16(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words8)a, (words8)b, 4, 12, 5, 13, 6, 14, 7, 15);
}
TRANSPOSE_INLINE bytes16 lo32(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words4)a, (words4)b, 0, 4, 1, 5);
}
TRANSPOSE_INLINE bytes16 hi32(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words4)a, (words4)b, 2, 6, 3, 7);
}
TRANSPOSE_INLINE bytes16 lo64(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words2)a, (words2)b, 0, 2);
}
TRANSPOSE_INLINE bytes16 hi64(bytes16 a, bytes16 b) {
  return (bytes16)__builtin_shufflevector((words2)a, (words2)b, 1, 3);
}

TRANSPOSE_INLINE void transpose16(bytes16 r[16]) {
  TRANSPOSE_ROUND(r, lo8, hi8);
  TRANSPOSE_ROUND(r, lo16, hi16);
  TRANSPOSE_ROUND(r, lo32, hi32);
  TRANSPOSE_ROUND(r, lo64, hi64);
}

// One group of 16 slab rows from `base` (`count` of them real, the others copies of the last), 16 byte columns at
// a time up to `blockBytes`.
TRANSPOSE_INLINE void gather_group16(
  const uint8_t *source, intptr_t rowBytes, intptr_t base, intptr_t count, intptr_t blockBytes, uint8_t *transposed,
  intptr_t lanes) {
  const uint8_t *row[16];
  UNROLLED for (int i = 0; i < 16; i++) row[i] = source + (base + smaller(bit_reversed[i], count - 1)) * rowBytes;
  for (intptr_t chunk = 0; chunk < blockBytes; chunk += 16) {
    if ((chunk & 63) == 0) {
      UNROLLED for (int i = 0; i < 16; i++) prefetch_read_ahead(row[i] + chunk);
    }
    bytes16 r[16];
    UNROLLED for (int i = 0; i < 16; i++) r[i] = load16(row[i] + chunk);
    transpose16(r);
    uint8_t *out = transposed + chunk * lanes + base;
    UNROLLED for (int j = 0; j < 16; j++) store16(out + j * lanes, r[j]);
  }
}

// Prefetches output rows `base..<base + count` `PREFETCH_DISTANCE` bytes past `target` (a write hint).
TRANSPOSE_INLINE void prefetch_rows(uint8_t *target, intptr_t rowBytes, intptr_t base, intptr_t count) {
  uintptr_t ahead = (uintptr_t)(target + base * rowBytes) + PREFETCH_DISTANCE;
  for (intptr_t k = 0; k < count; k++) __builtin_prefetch((const void *)(ahead + (uintptr_t)(k * rowBytes)), 1);
}

// Slab rows `base..<base + count` (at most 16) of one block, back from the transposed layout.
TRANSPOSE_INLINE void scatter_group16(
  const uint8_t *finished, intptr_t lanes, intptr_t base, intptr_t count, intptr_t blockBytes, uint8_t *target,
  intptr_t rowBytes) {
  prefetch_rows(target, rowBytes, base, count);
  for (intptr_t chunk = 0; chunk < blockBytes; chunk += 16) {
    const uint8_t *in = finished + chunk * lanes + base;
    bytes16 r[16];
    UNROLLED for (int i = 0; i < 16; i++) r[i] = load16(in + bit_reversed[i] * lanes);
    transpose16(r);
    uint8_t *out = target + base * rowBytes + chunk;
    if (count >= 16) {
      UNROLLED for (int k = 0; k < 16; k++) store16(out + k * rowBytes, r[k]);
    } else {
      UNROLLED for (int k = 0; k < 16; k++)
        if (k < count) store16(out + k * rowBytes, r[k]);
    }
  }
}

static void slab_gather_baseline(
  const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
  uint8_t *transposed, intptr_t lanes) {
  for (intptr_t base = 0; base < rows; base += 16) {
    intptr_t count = smaller(rows - base, 16);
    gather_group16(source, rowBytes, base, count, blockBytes, transposed, lanes);
    gather_bytes(source, rowBytes, base, count, blockBytes, columns, transposed, lanes);
  }
}

static void slab_scatter_block_baseline(
  const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes) {
  for (intptr_t base = 0; base < rows; base += 16) {
    scatter_group16(finished, lanes, base, smaller(rows - base, 16), blockBytes, target, rowBytes);
  }
}
#else
// Without clang's vector extensions: byte by byte, the same bytes.
static void slab_gather_baseline(
  const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
  uint8_t *transposed, intptr_t lanes) {
  for (intptr_t base = 0; base < rows; base += 16) {
    intptr_t count = smaller(rows - base, 16);
    for (intptr_t i = 0; i < blockBytes; i++) {
      uint8_t *lane = transposed + i * lanes + base;
      for (intptr_t k = 0; k < 16; k++) lane[k] = source[(base + smaller(k, count - 1)) * rowBytes + i];
    }
    gather_bytes(source, rowBytes, base, count, blockBytes, columns, transposed, lanes);
  }
}

static void slab_scatter_block_baseline(
  const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes) {
  for (intptr_t k = 0; k < rows; k++) {
    for (intptr_t i = 0; i < blockBytes; i++) target[k * rowBytes + i] = finished[i * lanes + k];
  }
}
#endif

static const spindle_transpose_kernels baseline_transposes = {slab_gather_baseline, slab_scatter_block_baseline};

#if defined(__x86_64__) && defined(__clang__)
#define SPINDLE_HAS_AVX2_TRANSPOSES 1
#define TRANSPOSE_AVX2 __attribute__((target("avx2")))
#include <immintrin.h>

#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))

AVX2_INLINE __m256i lo8_avx2(__m256i a, __m256i b) { return _mm256_unpacklo_epi8(a, b); }
AVX2_INLINE __m256i hi8_avx2(__m256i a, __m256i b) { return _mm256_unpackhi_epi8(a, b); }
AVX2_INLINE __m256i lo16_avx2(__m256i a, __m256i b) { return _mm256_unpacklo_epi16(a, b); }
AVX2_INLINE __m256i hi16_avx2(__m256i a, __m256i b) { return _mm256_unpackhi_epi16(a, b); }
AVX2_INLINE __m256i lo32_avx2(__m256i a, __m256i b) { return _mm256_unpacklo_epi32(a, b); }
AVX2_INLINE __m256i hi32_avx2(__m256i a, __m256i b) { return _mm256_unpackhi_epi32(a, b); }
AVX2_INLINE __m256i lo64_avx2(__m256i a, __m256i b) { return _mm256_unpacklo_epi64(a, b); }
AVX2_INLINE __m256i hi64_avx2(__m256i a, __m256i b) { return _mm256_unpackhi_epi64(a, b); }

// Two 16 × 16 transposes at once, one per 128-bit half (the unpacks work within halves).
AVX2_INLINE void transpose16_avx2(__m256i r[16]) {
  TRANSPOSE_ROUND(r, lo8_avx2, hi8_avx2);
  TRANSPOSE_ROUND(r, lo16_avx2, hi16_avx2);
  TRANSPOSE_ROUND(r, lo32_avx2, hi32_avx2);
  TRANSPOSE_ROUND(r, lo64_avx2, hi64_avx2);
}

AVX2_INLINE __m256i load_pair(const uint8_t *low, const uint8_t *high) {
  return _mm256_inserti128_si256(
    _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)low)), _mm_loadu_si128((const __m128i *)high), 1);
}

TRANSPOSE_AVX2 static void slab_gather_avx2(
  const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
  uint8_t *transposed, intptr_t lanes) {
  intptr_t base = 0;
  // Two groups of 16 rows at once: the first whole, the second with copies of the last row past `rows`.
  for (; rows - base > 16; base += 32) {
    intptr_t count = smaller(rows - base, 32);
    const uint8_t *low[16], *high[16];
    UNROLLED for (int i = 0; i < 16; i++) {
      low[i] = source + (base + bit_reversed[i]) * rowBytes;
      high[i] = source + (base + smaller(16 + bit_reversed[i], count - 1)) * rowBytes;
    }
    for (intptr_t chunk = 0; chunk < blockBytes; chunk += 16) {
      __m256i r[16];
      if ((chunk & 63) == 0) {
        UNROLLED for (int i = 0; i < 16; i++) {
          prefetch_read_ahead(low[i] + chunk);
          prefetch_read_ahead(high[i] + chunk);
        }
      }
      UNROLLED for (int i = 0; i < 16; i++) r[i] = load_pair(low[i] + chunk, high[i] + chunk);
      transpose16_avx2(r);
      uint8_t *out = transposed + chunk * lanes + base;
      UNROLLED for (int j = 0; j < 16; j++) _mm256_storeu_si256((__m256i *)(out + j * lanes), r[j]);
    }
    gather_bytes(source, rowBytes, base, count, blockBytes, columns, transposed, lanes);
  }
  if (base < rows) {
    intptr_t count = rows - base;
    gather_group16(source, rowBytes, base, count, blockBytes, transposed, lanes);
    gather_bytes(source, rowBytes, base, count, blockBytes, columns, transposed, lanes);
  }
}

TRANSPOSE_AVX2 static void slab_scatter_block_avx2(
  const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes) {
  intptr_t base = 0;
  // Two groups of 16 rows at once: 32 lanes of each transposed row in one load; rows past `rows` not stored.
  for (; rows - base > 16; base += 32) {
    intptr_t count = rows - base;
    prefetch_rows(target, rowBytes, base, smaller(count, 32));
    for (intptr_t chunk = 0; chunk < blockBytes; chunk += 16) {
      const uint8_t *in = finished + chunk * lanes + base;
      __m256i r[16];
      UNROLLED for (int i = 0; i < 16; i++) {
        r[i] = _mm256_loadu_si256((const __m256i *)(in + bit_reversed[i] * lanes));
      }
      transpose16_avx2(r);
      uint8_t *out = target + base * rowBytes + chunk;
      if (count >= 32) {
        UNROLLED for (int k = 0; k < 16; k++) {
          _mm_storeu_si128((__m128i *)(out + k * rowBytes), _mm256_castsi256_si128(r[k]));
          _mm_storeu_si128((__m128i *)(out + (16 + k) * rowBytes), _mm256_extracti128_si256(r[k], 1));
        }
      } else {
        UNROLLED for (int k = 0; k < 16; k++) {
          _mm_storeu_si128((__m128i *)(out + k * rowBytes), _mm256_castsi256_si128(r[k]));
          if (16 + k < count) {
            _mm_storeu_si128((__m128i *)(out + (16 + k) * rowBytes), _mm256_extracti128_si256(r[k], 1));
          }
        }
      }
    }
  }
  if (base < rows) scatter_group16(finished, lanes, base, rows - base, blockBytes, target, rowBytes);
}

static const spindle_transpose_kernels avx2_transposes = {slab_gather_avx2, slab_scatter_block_avx2};
#endif

const spindle_transpose_kernels *spindle_transpose_kernels_for(int variant) {
  if (!spindle_kernels_supports(variant)) return 0;
#ifdef SPINDLE_HAS_AVX2_TRANSPOSES
  if (variant == SPINDLE_KERNELS_AVX2) return &avx2_transposes;
#endif
  if (variant == SPINDLE_KERNELS_BASELINE) return &baseline_transposes;
  return 0;
}

// The transposes of the variant in use (`spindle_kernels_variant()`: the filter kernels' choice, forced or not).
static inline const spindle_transpose_kernels *transposes(void) {
#ifdef SPINDLE_HAS_AVX2_TRANSPOSES
  if (spindle_kernels_variant() == SPINDLE_KERNELS_AVX2) return &avx2_transposes;
#endif
  return &baseline_transposes;
}

void spindle_slab_gather(
  const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
  uint8_t *transposed, intptr_t lanes) {
  transposes()->gather(source, rowBytes, rows, blockBytes, columns, transposed, lanes);
}

void spindle_slab_scatter_block(
  const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes) {
  transposes()->scatter_block(finished, lanes, rows, blockBytes, target, rowBytes);
}
