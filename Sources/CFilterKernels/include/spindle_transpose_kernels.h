#ifndef SPINDLE_TRANSPOSE_KERNELS_H
#define SPINDLE_TRANSPOSE_KERNELS_H

#include <stdint.h>

/// The byte transposes of the tilt-shift filter's horizontal passes (`SlabTranspose` in Swift), compiled once for
/// the baseline instruction set and once for AVX2 like the kernels of `spindle_filter_kernels.h`, and chosen by the
/// same variant (`spindle_kernels_variant()`, which `spindle_kernels_force_variant` switches for tests).
///
/// A slab of `rows` image rows, `rowBytes` apart, is read as a matrix of bytes; its transpose has one row of `lanes`
/// bytes per byte column: byte column `i` of slab row `k` is byte `i · lanes + k` of the transposed slab. (With
/// `channels` channels, that is channel `c` of pixel `x` at `(x · channels + c) · lanes`: the layout `SlabTranspose`
/// documents.) Whole 16-pixel blocks (`blockBytes`, a multiple of 16) move as 16 × 16 byte transposes; the bytes past
/// them one by one. Every variant writes the same bytes.

/// The transposes of one variant, for tests that compare the variants directly.
typedef struct {
  void (*gather)(
    const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
    uint8_t *transposed, intptr_t lanes);
  void (*scatter_block)(
    const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes);
} spindle_transpose_kernels;

/// The transposes of `variant` (a `SPINDLE_KERNELS_*` value), or null when the processor cannot run it.
const spindle_transpose_kernels *spindle_transpose_kernels_for(int variant);

/// Transposes slab rows `0..<rows` (at most `lanes`, a multiple of 16) from `source` into `transposed`: byte column
/// `i < columns` of row `k` to `transposed[i · lanes + k]`, in groups of 16 rows. For byte columns below
/// `blockBytes`, the lanes past `rows` in the last group get copies of the last row; for the columns from
/// `blockBytes` to `columns`, only lanes below `rows` are written. Lanes of whole groups past `rows` keep what they
/// held.
void spindle_slab_gather(
  const uint8_t *source, intptr_t rowBytes, intptr_t rows, intptr_t blockBytes, intptr_t columns,
  uint8_t *transposed, intptr_t lanes);

/// The inverse for one block of `blockBytes` byte columns (a multiple of 16): byte `i · lanes + k` of `finished`
/// to byte column `i` of row `k` at `target`, for `i < blockBytes` and rows `k < rows` (at most `lanes`, a multiple
/// of 16) only.
void spindle_slab_scatter_block(
  const uint8_t *finished, intptr_t lanes, intptr_t rows, intptr_t blockBytes, uint8_t *target, intptr_t rowBytes);

#endif
