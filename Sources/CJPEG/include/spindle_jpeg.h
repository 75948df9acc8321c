#ifndef SPINDLE_JPEG_H
#define SPINDLE_JPEG_H

#include <stddef.h>
#include <stdint.h>

/// Status codes returned by the JPEG shim.
enum {
  SPINDLE_JPEG_OK = 0,
  /// The data is corrupt or truncated; the message says why (libjpeg's own wording).
  SPINDLE_JPEG_CORRUPT = 1,
  /// The header declares more pixels than the caller allows.
  SPINDLE_JPEG_TOO_MANY_PIXELS = 2,
  /// A colour space the shim does not convert (anything but gray, YCbCr/RGB, CMYK/YCCK).
  SPINDLE_JPEG_UNSUPPORTED = 3,
  /// malloc failed or a size overflowed.
  SPINDLE_JPEG_NO_MEMORY = 4,
  /// The caller passed bad arguments (wrong buffer size, unsupported channel count, wrong call order).
  SPINDLE_JPEG_MISUSE = 5,
};

/// An in-progress decode: created, header read, pixels read, destroyed.
typedef struct spindle_jpeg_decoder spindle_jpeg_decoder;

/// Creates a decoder over `data` (not copied: it must outlive the decoder). NULL when out of memory.
spindle_jpeg_decoder *spindle_jpeg_decoder_create(const uint8_t *data, size_t length);

/// Reads the header. On success fills width, height and output channels (1 gray or 3 RGB).
/// Refuses (SPINDLE_JPEG_TOO_MANY_PIXELS) before any pixel buffer exists when width*height > max_pixels.
int spindle_jpeg_decoder_read_header(spindle_jpeg_decoder *decoder, uint64_t max_pixels, int *width, int *height,
                                     int *channels);

/// Decodes all pixels into `pixels` (width*height*channels bytes, rows top to bottom, no padding).
int spindle_jpeg_decoder_read_pixels(spindle_jpeg_decoder *decoder, uint8_t *pixels, size_t capacity);

/// The human message of the last failure ("" when none). Valid until the decoder is destroyed.
const char *spindle_jpeg_decoder_message(const spindle_jpeg_decoder *decoder);

/// The payload of the first APP1 "Exif" marker seen in the header (NULL when none).
const uint8_t *spindle_jpeg_decoder_exif(const spindle_jpeg_decoder *decoder, size_t *length);

/// Whether the source was progressive (valid after the header was read).
int spindle_jpeg_decoder_is_progressive(const spindle_jpeg_decoder *decoder);

/// Frees the decoder and everything it owns.
void spindle_jpeg_decoder_destroy(spindle_jpeg_decoder *decoder);

/// Encodes interleaved 8-bit pixels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; alpha is dropped) as JPEG.
/// `exif` (may be NULL) is written back as an APP1 marker right after SOI.
/// On success *output is a malloc'd buffer the caller releases with spindle_jpeg_free.
/// On failure `message` (capacity bytes) receives a human message.
int spindle_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int progressive,
                        const uint8_t *exif, size_t exif_length, uint8_t **output, size_t *output_length,
                        char *message, size_t capacity);

/// Releases a buffer returned by spindle_jpeg_encode.
void spindle_jpeg_free(void *buffer);

#endif
