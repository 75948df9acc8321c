#ifndef SPINDLE_PNG_H
#define SPINDLE_PNG_H

#include <stddef.h>
#include <stdint.h>

/// Status codes returned by the PNG shim.
enum {
  SPINDLE_PNG_OK = 0,
  /// The data is corrupt or truncated; the message says why (libpng's own wording).
  SPINDLE_PNG_CORRUPT = 1,
  /// The header declares more pixels than the caller allows.
  SPINDLE_PNG_TOO_MANY_PIXELS = 2,
  /// malloc failed or a size overflowed.
  SPINDLE_PNG_NO_MEMORY = 4,
  /// The caller passed bad arguments (wrong buffer size, unsupported channel count, wrong call order).
  SPINDLE_PNG_MISUSE = 5,
};

/// An in-progress decode: created, header read, pixels read, destroyed.
typedef struct spindle_png_decoder spindle_png_decoder;

/// Creates a decoder over `data` (not copied: it must outlive the decoder). NULL when out of memory.
spindle_png_decoder *spindle_png_decoder_create(const uint8_t *data, size_t length);

/// Reads the header and sets up 8-bit output: palette and low bit depths expand, tRNS becomes alpha,
/// 16-bit samples are scaled to 8, interlacing is undone. Fills width, height and channels (1 to 4).
/// Refuses (SPINDLE_PNG_TOO_MANY_PIXELS) before any pixel buffer exists when width*height > max_pixels.
int spindle_png_decoder_read_header(spindle_png_decoder *decoder, uint64_t max_pixels, int *width, int *height,
                                    int *channels);

/// Decodes all pixels into `pixels` (width*height*channels bytes, rows top to bottom, no padding).
int spindle_png_decoder_read_pixels(spindle_png_decoder *decoder, uint8_t *pixels, size_t capacity);

/// The human message of the last failure ("" when none). Valid until the decoder is destroyed.
const char *spindle_png_decoder_message(const spindle_png_decoder *decoder);

/// Frees the decoder and everything it owns.
void spindle_png_decoder_destroy(spindle_png_decoder *decoder);

/// Encodes interleaved 8-bit pixels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) as PNG.
/// `compression` is zlib's level 0-9 (-1 for libpng's default); `interlaced` writes Adam7.
/// On success *output is a malloc'd buffer the caller releases with spindle_png_free.
/// On failure `message` (capacity bytes) receives a human message.
int spindle_png_encode(const uint8_t *pixels, int width, int height, int channels, int compression, int interlaced,
                       uint8_t **output, size_t *output_length, char *message, size_t capacity);

/// Releases a buffer returned by spindle_png_encode.
void spindle_png_free(void *buffer);

#endif
