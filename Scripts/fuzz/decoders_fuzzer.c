// libFuzzer target over both decoder shims: every input goes through the JPEG and the PNG decoder
// (header, pixels strict or lenient, every metadata getter), as the Swift decoder drives them.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spindle_jpeg.h"
#include "spindle_png.h"

/// Keeps a fuzz input from asking for gigabytes: 4 megapixels at most, as a bomb limit would.
#define FUZZ_MAX_PIXELS (1u << 22)

static volatile size_t sink;

static void fuzz_jpeg(const uint8_t *data, size_t size, int lenient) {
  spindle_jpeg_decoder *decoder = spindle_jpeg_decoder_create(data, size);
  if (decoder == NULL) return;
  int width = 0, height = 0, channels = 0;
  if (spindle_jpeg_decoder_read_header(decoder, FUZZ_MAX_PIXELS, &width, &height, &channels) == SPINDLE_JPEG_OK) {
    size_t count = (size_t)width * (size_t)height * (size_t)channels;
    uint8_t *pixels = malloc(count);
    if (pixels != NULL) {
      spindle_jpeg_decoder_read_pixels(decoder, pixels, count, lenient);
      int first_row = 0;
      sink += (size_t)spindle_jpeg_decoder_damage(decoder, &first_row);
      free(pixels);
    }
  }
  for (int i = 0; i < spindle_jpeg_decoder_marker_count(decoder); i++) {
    int code = 0;
    size_t length = 0;
    const uint8_t *bytes = spindle_jpeg_decoder_marker(decoder, i, &code, &length);
    if (bytes != NULL && length > 0) sink += bytes[0] + bytes[length - 1];
  }
  int unit = 0, x = 0, y = 0;
  sink += (size_t)spindle_jpeg_decoder_density(decoder, &unit, &x, &y);
  sink += strlen(spindle_jpeg_decoder_message(decoder));
  spindle_jpeg_decoder_destroy(decoder);
}

static void fuzz_png(const uint8_t *data, size_t size, int lenient, int keep16) {
  spindle_png_decoder *decoder = spindle_png_decoder_create(data, size);
  if (decoder == NULL) return;
  int width = 0, height = 0, channels = 0, depth = 0;
  if (spindle_png_decoder_read_header(decoder, FUZZ_MAX_PIXELS, keep16, &width, &height, &channels, &depth) ==
      SPINDLE_PNG_OK) {
    size_t count = (size_t)width * (size_t)height * (size_t)channels * (size_t)(depth / 8);
    uint8_t *pixels = malloc(count);
    if (pixels != NULL) {
      spindle_png_decoder_read_pixels(decoder, pixels, count, lenient);
      int first_row = 0;
      sink += (size_t)spindle_png_decoder_damage(decoder, &first_row);
      free(pixels);
    }
  }
  size_t length = 0;
  const char *name = NULL;
  const uint8_t *icc = spindle_png_decoder_icc(decoder, &length, &name);
  if (icc != NULL && length > 0) sink += icc[length - 1] + strlen(name);
  const uint8_t *exif = spindle_png_decoder_exif(decoder, &length);
  if (exif != NULL && length > 0) sink += exif[length - 1];
  for (int i = 0; i < spindle_png_decoder_text_count(decoder); i++) {
    spindle_png_text text;
    if (spindle_png_decoder_text(decoder, i, &text) && text.text != NULL && text.text_length > 0)
      sink += (uint8_t)text.text[text.text_length - 1] + strlen(text.keyword);
  }
  spindle_png_colour colour;
  spindle_png_decoder_colour(decoder, &colour);
  sink += (size_t)colour.has_phys;
  sink += strlen(spindle_png_decoder_message(decoder));
  spindle_png_decoder_destroy(decoder);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The last byte picks the modes, so one corpus explores strict, lenient and 16-bit decodes.
  int mode = size > 0 ? data[size - 1] : 0;
  fuzz_jpeg(data, size, mode & 1);
  fuzz_png(data, size, mode & 1, (mode >> 1) & 1);
  return 0;
}
