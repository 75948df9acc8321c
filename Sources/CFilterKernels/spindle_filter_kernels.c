#include "spindle_filter_kernels.h"

#include <stdatomic.h>

// Each kernel has a scalar loop, written once as an always-inline function: the baseline variant is that loop (the
// compiler vectorises it for the baseline instruction set), and the AVX2 variant, on x86-64, is the same arithmetic
// written with AVX2 intrinsics 32 bytes at a time, ending with the scalar loop for the last bytes. A call goes
// through the table of the variant in use (a relaxed load and an indirect call per row of up to 2 KB).
//
// The pointers of one call never overlap (`restrict`): the filter slides from one row into another, never in place.

#define SPINDLE_INLINE static inline __attribute__((always_inline))

SPINDLE_INLINE void slide_row_u16(
  uint16_t *restrict sums, uint8_t *restrict output, const uint8_t *restrict entering,
  const uint8_t *restrict leaving, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  for (intptr_t j = 0; j < count; j++) {
    uint16_t sum = sums[j];
    uint16_t high = (uint16_t)(((uint32_t)(uint16_t)(sum + rounding) * multiplier) >> 16);
    output[j] = (uint8_t)(high >> shift);
    sums[j] = (uint16_t)(sum + entering[j] - leaving[j]);
  }
}

SPINDLE_INLINE uint16_t average_u16(uint16_t sum, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  uint16_t high = (uint16_t)(((uint32_t)(uint16_t)(sum + rounding) * multiplier) >> 16);
  return (uint8_t)(high >> shift);
}

// Three slides of a cascade at once: stage 1's output is stage 2's entering row, stage 2's is stage 3's.
SPINDLE_INLINE void slide3_row_u16(
  uint16_t *restrict sums1, uint16_t *restrict sums2, uint16_t *restrict sums3, uint8_t *restrict output1,
  uint8_t *restrict output2, uint8_t *restrict output3, const uint8_t *restrict entering,
  const uint8_t *restrict leaving1, const uint8_t *restrict leaving2, const uint8_t *restrict leaving3,
  intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  for (intptr_t j = 0; j < count; j++) {
    uint16_t s1 = sums1[j], s2 = sums2[j], s3 = sums3[j];
    uint16_t a1 = average_u16(s1, rounding, multiplier, shift);
    uint16_t a2 = average_u16(s2, rounding, multiplier, shift);
    uint16_t a3 = average_u16(s3, rounding, multiplier, shift);
    output1[j] = (uint8_t)a1;
    output2[j] = (uint8_t)a2;
    output3[j] = (uint8_t)a3;
    sums1[j] = (uint16_t)(s1 + entering[j] - leaving1[j]);
    sums2[j] = (uint16_t)(s2 + a1 - leaving2[j]);
    sums3[j] = (uint16_t)(s3 + a2 - leaving3[j]);
  }
}

SPINDLE_INLINE void average_row_u16(
  const uint16_t *restrict sums, uint8_t *restrict output, intptr_t count, uint16_t rounding, uint16_t multiplier,
  uint16_t shift) {
  for (intptr_t j = 0; j < count; j++) {
    uint16_t high = (uint16_t)(((uint32_t)(uint16_t)(sums[j] + rounding) * multiplier) >> 16);
    output[j] = (uint8_t)(high >> shift);
  }
}

SPINDLE_INLINE uint8_t mix(uint16_t a, uint16_t wa, uint16_t b, uint16_t wb) {
  uint16_t x = (uint16_t)(a * wa + b * wb + 127);
  return (uint8_t)((uint16_t)(x + 1 + (x >> 8)) >> 8);
}

SPINDLE_INLINE void blend_row(uint8_t *restrict target, const uint8_t *restrict blurred, intptr_t count, uint16_t weight) {
  uint16_t keep = (uint16_t)(255 - weight);
  for (intptr_t j = 0; j < count; j++) target[j] = mix(target[j], keep, blurred[j], weight);
}

SPINDLE_INLINE void blend_weighted(
  uint8_t *restrict target, const uint8_t *restrict blurred, const uint8_t *restrict weights, intptr_t count) {
  for (intptr_t j = 0; j < count; j++) {
    uint16_t weight = weights[j];
    target[j] = mix(target[j], (uint16_t)(255 - weight), blurred[j], weight);
  }
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define SPINDLE_HAS_AVX2_VARIANT 1
#define SPINDLE_AVX2 __attribute__((target("avx2")))
#include <immintrin.h>

// Written with intrinsics, not left to the vectoriser: it widens the multiply to 32 bits (`vpmulld`) instead of
// taking the high half of a 16-bit one (`vpmulhuw`), and so runs at half the speed.
SPINDLE_AVX2 static inline __m256i average16_avx2(__m256i sums, __m256i rounding, __m256i multiplier, __m128i shift) {
  __m256i high = _mm256_mulhi_epu16(_mm256_add_epi16(sums, rounding), multiplier);
  // Masked to 8 bits before the saturating pack: the same truncation as the scalar loop, whatever the sums hold.
  return _mm256_and_si256(_mm256_srl_epi16(high, shift), _mm256_set1_epi16(0xFF));
}

// 16 bytes from `bytes`, each widened to a 16-bit lane.
SPINDLE_AVX2 static inline __m256i widen16_avx2(const uint8_t *bytes) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)bytes));
}

// Packs two vectors of 16 words (each at most 255) into 32 bytes in order (`packus` interleaves 128-bit halves).
SPINDLE_AVX2 static inline __m256i pack32_avx2(__m256i low, __m256i high) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi16(low, high), 0xD8);
}

SPINDLE_AVX2 static void slide_row_u16_avx2(
  uint16_t *sums, uint8_t *output, const uint8_t *entering, const uint8_t *leaving, intptr_t count, uint16_t rounding,
  uint16_t multiplier, uint16_t shift) {
  const __m256i vrounding = _mm256_set1_epi16((short)rounding);
  const __m256i vmultiplier = _mm256_set1_epi16((short)multiplier);
  const __m128i vshift = _mm_cvtsi32_si128(shift);
  intptr_t j = 0;
  for (; j + 32 <= count; j += 32) {
    __m256i s0 = _mm256_loadu_si256((const __m256i *)(sums + j));
    __m256i s1 = _mm256_loadu_si256((const __m256i *)(sums + j + 16));
    __m256i a0 = average16_avx2(s0, vrounding, vmultiplier, vshift);
    __m256i a1 = average16_avx2(s1, vrounding, vmultiplier, vshift);
    _mm256_storeu_si256((__m256i *)(output + j), pack32_avx2(a0, a1));
    __m256i e0 = widen16_avx2(entering + j);
    __m256i e1 = widen16_avx2(entering + j + 16);
    __m256i l0 = widen16_avx2(leaving + j);
    __m256i l1 = widen16_avx2(leaving + j + 16);
    _mm256_storeu_si256((__m256i *)(sums + j), _mm256_sub_epi16(_mm256_add_epi16(s0, e0), l0));
    _mm256_storeu_si256((__m256i *)(sums + j + 16), _mm256_sub_epi16(_mm256_add_epi16(s1, e1), l1));
  }
  slide_row_u16(sums + j, output + j, entering + j, leaving + j, count - j, rounding, multiplier, shift);
}

SPINDLE_AVX2 static void slide3_row_u16_avx2(
  uint16_t *sums1, uint16_t *sums2, uint16_t *sums3, uint8_t *output1, uint8_t *output2, uint8_t *output3,
  const uint8_t *entering, const uint8_t *leaving1, const uint8_t *leaving2, const uint8_t *leaving3, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  const __m256i vrounding = _mm256_set1_epi16((short)rounding);
  const __m256i vmultiplier = _mm256_set1_epi16((short)multiplier);
  const __m128i vshift = _mm_cvtsi32_si128(shift);
  intptr_t j = 0;
  for (; j + 32 <= count; j += 32) {
    // Stage 1: its averages (16-bit lanes, already truncated to 8 bits) are stage 2's entering bytes.
    __m256i s0 = _mm256_loadu_si256((const __m256i *)(sums1 + j));
    __m256i s1 = _mm256_loadu_si256((const __m256i *)(sums1 + j + 16));
    __m256i a0 = average16_avx2(s0, vrounding, vmultiplier, vshift);
    __m256i a1 = average16_avx2(s1, vrounding, vmultiplier, vshift);
    _mm256_storeu_si256((__m256i *)(output1 + j), pack32_avx2(a0, a1));
    _mm256_storeu_si256(
      (__m256i *)(sums1 + j),
      _mm256_sub_epi16(_mm256_add_epi16(s0, widen16_avx2(entering + j)), widen16_avx2(leaving1 + j)));
    _mm256_storeu_si256(
      (__m256i *)(sums1 + j + 16),
      _mm256_sub_epi16(_mm256_add_epi16(s1, widen16_avx2(entering + j + 16)), widen16_avx2(leaving1 + j + 16)));
    // Stage 2: enters stage 1's averages; its own are stage 3's entering bytes.
    s0 = _mm256_loadu_si256((const __m256i *)(sums2 + j));
    s1 = _mm256_loadu_si256((const __m256i *)(sums2 + j + 16));
    __m256i b0 = average16_avx2(s0, vrounding, vmultiplier, vshift);
    __m256i b1 = average16_avx2(s1, vrounding, vmultiplier, vshift);
    _mm256_storeu_si256((__m256i *)(output2 + j), pack32_avx2(b0, b1));
    _mm256_storeu_si256((__m256i *)(sums2 + j), _mm256_sub_epi16(_mm256_add_epi16(s0, a0), widen16_avx2(leaving2 + j)));
    _mm256_storeu_si256(
      (__m256i *)(sums2 + j + 16), _mm256_sub_epi16(_mm256_add_epi16(s1, a1), widen16_avx2(leaving2 + j + 16)));
    // Stage 3.
    s0 = _mm256_loadu_si256((const __m256i *)(sums3 + j));
    s1 = _mm256_loadu_si256((const __m256i *)(sums3 + j + 16));
    __m256i c0 = average16_avx2(s0, vrounding, vmultiplier, vshift);
    __m256i c1 = average16_avx2(s1, vrounding, vmultiplier, vshift);
    _mm256_storeu_si256((__m256i *)(output3 + j), pack32_avx2(c0, c1));
    _mm256_storeu_si256((__m256i *)(sums3 + j), _mm256_sub_epi16(_mm256_add_epi16(s0, b0), widen16_avx2(leaving3 + j)));
    _mm256_storeu_si256(
      (__m256i *)(sums3 + j + 16), _mm256_sub_epi16(_mm256_add_epi16(s1, b1), widen16_avx2(leaving3 + j + 16)));
  }
  slide3_row_u16(
    sums1 + j, sums2 + j, sums3 + j, output1 + j, output2 + j, output3 + j, entering + j, leaving1 + j, leaving2 + j,
    leaving3 + j, count - j, rounding, multiplier, shift);
}

SPINDLE_AVX2 static void average_row_u16_avx2(
  const uint16_t *sums, uint8_t *output, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  const __m256i vrounding = _mm256_set1_epi16((short)rounding);
  const __m256i vmultiplier = _mm256_set1_epi16((short)multiplier);
  const __m128i vshift = _mm_cvtsi32_si128(shift);
  intptr_t j = 0;
  for (; j + 32 <= count; j += 32) {
    __m256i a0 = average16_avx2(_mm256_loadu_si256((const __m256i *)(sums + j)), vrounding, vmultiplier, vshift);
    __m256i a1 = average16_avx2(_mm256_loadu_si256((const __m256i *)(sums + j + 16)), vrounding, vmultiplier, vshift);
    _mm256_storeu_si256((__m256i *)(output + j), pack32_avx2(a0, a1));
  }
  average_row_u16(sums + j, output + j, count - j, rounding, multiplier, shift);
}

// `mix` on 16 lanes: x = a·wa + b·wb + 127, then (x + 1 + (x >> 8)) >> 8, all in 16 bits.
SPINDLE_AVX2 static inline __m256i mix16_avx2(__m256i a, __m256i wa, __m256i b, __m256i wb) {
  __m256i x = _mm256_add_epi16(
    _mm256_add_epi16(_mm256_mullo_epi16(a, wa), _mm256_mullo_epi16(b, wb)), _mm256_set1_epi16(127));
  __m256i y = _mm256_add_epi16(_mm256_add_epi16(x, _mm256_set1_epi16(1)), _mm256_srli_epi16(x, 8));
  return _mm256_srli_epi16(y, 8);
}

SPINDLE_AVX2 static void blend_row_avx2(uint8_t *target, const uint8_t *blurred, intptr_t count, uint16_t weight) {
  const __m256i vweight = _mm256_set1_epi16((short)weight);
  const __m256i vkeep = _mm256_set1_epi16((short)(255 - weight));
  intptr_t j = 0;
  for (; j + 32 <= count; j += 32) {
    __m256i m0 = mix16_avx2(widen16_avx2(target + j), vkeep, widen16_avx2(blurred + j), vweight);
    __m256i m1 = mix16_avx2(widen16_avx2(target + j + 16), vkeep, widen16_avx2(blurred + j + 16), vweight);
    _mm256_storeu_si256((__m256i *)(target + j), pack32_avx2(m0, m1));
  }
  blend_row(target + j, blurred + j, count - j, weight);
}

SPINDLE_AVX2 static void blend_weighted_avx2(
  uint8_t *target, const uint8_t *blurred, const uint8_t *weights, intptr_t count) {
  const __m256i full = _mm256_set1_epi16(255);
  intptr_t j = 0;
  for (; j + 32 <= count; j += 32) {
    __m256i w0 = widen16_avx2(weights + j);
    __m256i w1 = widen16_avx2(weights + j + 16);
    __m256i m0 = mix16_avx2(widen16_avx2(target + j), _mm256_sub_epi16(full, w0), widen16_avx2(blurred + j), w0);
    __m256i m1 =
      mix16_avx2(widen16_avx2(target + j + 16), _mm256_sub_epi16(full, w1), widen16_avx2(blurred + j + 16), w1);
    _mm256_storeu_si256((__m256i *)(target + j), pack32_avx2(m0, m1));
  }
  blend_weighted(target + j, blurred + j, weights + j, count - j);
}
#endif

static void slide_row_u16_baseline(
  uint16_t *sums, uint8_t *output, const uint8_t *entering, const uint8_t *leaving, intptr_t count, uint16_t rounding,
  uint16_t multiplier, uint16_t shift) {
  slide_row_u16(sums, output, entering, leaving, count, rounding, multiplier, shift);
}

static void slide3_row_u16_baseline(
  uint16_t *sums1, uint16_t *sums2, uint16_t *sums3, uint8_t *output1, uint8_t *output2, uint8_t *output3,
  const uint8_t *entering, const uint8_t *leaving1, const uint8_t *leaving2, const uint8_t *leaving3, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  slide3_row_u16(
    sums1, sums2, sums3, output1, output2, output3, entering, leaving1, leaving2, leaving3, count, rounding,
    multiplier, shift);
}

static void average_row_u16_baseline(
  const uint16_t *sums, uint8_t *output, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  average_row_u16(sums, output, count, rounding, multiplier, shift);
}

static void blend_row_baseline(uint8_t *target, const uint8_t *blurred, intptr_t count, uint16_t weight) {
  blend_row(target, blurred, count, weight);
}

static void blend_weighted_baseline(uint8_t *target, const uint8_t *blurred, const uint8_t *weights, intptr_t count) {
  blend_weighted(target, blurred, weights, count);
}

static const spindle_filter_kernels baseline_kernels = {
  slide_row_u16_baseline, slide3_row_u16_baseline, average_row_u16_baseline, blend_row_baseline,
  blend_weighted_baseline};

#ifdef SPINDLE_HAS_AVX2_VARIANT
static const spindle_filter_kernels avx2_kernels = {
  slide_row_u16_avx2, slide3_row_u16_avx2, average_row_u16_avx2, blend_row_avx2, blend_weighted_avx2};
#endif

int spindle_kernels_supports(int variant) {
  switch (variant) {
  case SPINDLE_KERNELS_BASELINE:
    return 1;
#ifdef SPINDLE_HAS_AVX2_VARIANT
  case SPINDLE_KERNELS_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
  default:
    return 0;
  }
}

const spindle_filter_kernels *spindle_kernels_for(int variant) {
  if (!spindle_kernels_supports(variant)) return 0;
#ifdef SPINDLE_HAS_AVX2_VARIANT
  if (variant == SPINDLE_KERNELS_AVX2) return &avx2_kernels;
#endif
  return &baseline_kernels;
}

// The kernels in use; null until the first call chooses them. Relaxed: every thread that chooses chooses the same
// table (or the one a test forced), and the tables are constants.
static _Atomic(const spindle_filter_kernels *) chosen = 0;

static const spindle_filter_kernels *automatic_kernels(void) {
  const spindle_filter_kernels *widest = spindle_kernels_for(SPINDLE_KERNELS_AVX2);
  return widest ? widest : &baseline_kernels;
}

static inline const spindle_filter_kernels *kernels(void) {
  const spindle_filter_kernels *table = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (__builtin_expect(table == 0, 0)) {
    table = automatic_kernels();
    atomic_store_explicit(&chosen, table, memory_order_relaxed);
  }
  return table;
}

int spindle_kernels_variant(void) {
#ifdef SPINDLE_HAS_AVX2_VARIANT
  if (kernels() == &avx2_kernels) return SPINDLE_KERNELS_AVX2;
#endif
  return SPINDLE_KERNELS_BASELINE;
}

int spindle_kernels_force_variant(int variant) {
  const spindle_filter_kernels *table = variant < 0 ? automatic_kernels() : spindle_kernels_for(variant);
  if (!table) return 0;
  atomic_store_explicit(&chosen, table, memory_order_relaxed);
  return 1;
}

void spindle_slide_row_u16(
  uint16_t *sums, uint8_t *output, const uint8_t *entering, const uint8_t *leaving, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  kernels()->slide_row_u16(sums, output, entering, leaving, count, rounding, multiplier, shift);
}

void spindle_slide3_row_u16(
  uint16_t *sums1, uint16_t *sums2, uint16_t *sums3, uint8_t *output1, uint8_t *output2, uint8_t *output3,
  const uint8_t *entering, const uint8_t *leaving1, const uint8_t *leaving2, const uint8_t *leaving3, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  kernels()->slide3_row_u16(
    sums1, sums2, sums3, output1, output2, output3, entering, leaving1, leaving2, leaving3, count, rounding,
    multiplier, shift);
}

void spindle_average_row_u16(
  const uint16_t *sums, uint8_t *output, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift) {
  kernels()->average_row_u16(sums, output, count, rounding, multiplier, shift);
}

void spindle_blend_row(uint8_t *target, const uint8_t *blurred, intptr_t count, uint16_t weight) {
  kernels()->blend_row(target, blurred, count, weight);
}

void spindle_blend_weighted(uint8_t *target, const uint8_t *blurred, const uint8_t *weights, intptr_t count) {
  kernels()->blend_weighted(target, blurred, weights, count);
}
