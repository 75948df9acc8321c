#ifndef SPINDLE_FILTER_KERNELS_H
#define SPINDLE_FILTER_KERNELS_H

#include <stdint.h>

/// The tilt-shift filter's innermost loops, in C so that they can be compiled twice: once for the baseline
/// instruction set and once for AVX2, chosen at run time by what the processor supports (Swift has no
/// per-function target attribute, and a package cannot require AVX2 of every machine it runs on).
///
/// Every kernel computes exactly what the Swift loops they replace computed (integer arithmetic, the same
/// wrap-around), whichever variant runs: the variant changes only how many lanes one instruction handles.

/// The instruction sets a kernel can run with.
enum {
  /// Whatever the compiler's baseline for the target is (SSE2 on x86-64, NEON on arm64).
  SPINDLE_KERNELS_BASELINE = 0,
  /// x86-64 with AVX2 (256-bit integer vectors).
  SPINDLE_KERNELS_AVX2 = 1,
};

/// The variant the kernels use: the widest one the processor supports, unless a test forced another.
int spindle_kernels_variant(void);

/// Whether the processor can run `variant`.
int spindle_kernels_supports(int variant);

/// Makes every later kernel call use `variant` (tests compare the variants); -1 goes back to the automatic
/// choice. Ignored (returns 0) for a variant the processor cannot run; returns 1 when it took effect.
int spindle_kernels_force_variant(int variant);

/// The kernels of one variant, for tests that compare the variants directly.
typedef struct {
  void (*slide_row_u16)(
    uint16_t *sums, uint8_t *output, const uint8_t *entering, const uint8_t *leaving, intptr_t count,
    uint16_t rounding, uint16_t multiplier, uint16_t shift);
  void (*slide3_row_u16)(
    uint16_t *sums1, uint16_t *sums2, uint16_t *sums3, uint8_t *output1, uint8_t *output2, uint8_t *output3,
    const uint8_t *entering, const uint8_t *leaving1, const uint8_t *leaving2, const uint8_t *leaving3,
    intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift);
  void (*average_row_u16)(
    const uint16_t *sums, uint8_t *output, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift);
  void (*blend_row)(uint8_t *target, const uint8_t *blurred, intptr_t count, uint16_t weight);
  void (*blend_weighted)(uint8_t *target, const uint8_t *blurred, const uint8_t *weights, intptr_t count);
} spindle_filter_kernels;

/// The kernels of `variant`, or null when the processor cannot run it.
const spindle_filter_kernels *spindle_kernels_for(int variant);

/// One step of a box blur's running sums over `count` byte columns, with 16-bit sums:
/// `output[j] = ((uint32_t)(sums[j] + rounding) * multiplier >> 16) >> shift` (truncated to 8 bits), then
/// `sums[j] += entering[j] - leaving[j]` (wrapping in 16 bits).
void spindle_slide_row_u16(
  uint16_t *sums, uint8_t *output, const uint8_t *entering, const uint8_t *leaving, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift);

/// One step of a cascade of three box blurs, each stage entering the row the stage before it outputs in this
/// same step: ``spindle_slide_row_u16`` on `sums1` (entering `entering`, leaving `leaving1`, output to
/// `output1`), then on `sums2` entering `output1` (leaving `leaving2`, output to `output2`), then on `sums3`
/// entering `output2` (leaving `leaving3`, output to `output3`). The same bytes and sums as those three calls,
/// with stage 1's and stage 2's outputs taken from registers instead of read back. No pointer may overlap another.
void spindle_slide3_row_u16(
  uint16_t *sums1, uint16_t *sums2, uint16_t *sums3, uint8_t *output1, uint8_t *output2, uint8_t *output3,
  const uint8_t *entering, const uint8_t *leaving1, const uint8_t *leaving2, const uint8_t *leaving3, intptr_t count,
  uint16_t rounding, uint16_t multiplier, uint16_t shift);

/// The output half of ``spindle_slide_row_u16`` alone (the last row of a run: the sums do not move).
void spindle_average_row_u16(
  const uint16_t *sums, uint8_t *output, intptr_t count, uint16_t rounding, uint16_t multiplier, uint16_t shift);

/// Blends `count` blurred bytes into `target` with one weight: `target[j] = mix(target[j], 255 - weight,
/// blurred[j], weight)`, where `mix(a, wa, b, wb)` is `x = a·wa + b·wb + 127; (x + 1 + (x >> 8)) >> 8` in 16 bits
/// (the rounded `x / 255`).
void spindle_blend_row(uint8_t *target, const uint8_t *blurred, intptr_t count, uint16_t weight);

/// ``spindle_blend_row`` with a weight per byte: `weights[j]` for byte `j`.
void spindle_blend_weighted(uint8_t *target, const uint8_t *blurred, const uint8_t *weights, intptr_t count);

#endif
