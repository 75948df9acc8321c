// libpng reports errors by longjmp; this shim catches them at every entry point, keeps the message
// instead of printing it, and silences warnings.
#include "spindle_png.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#define SPINDLE_PNG_MESSAGE 256

typedef struct {
  char message[SPINDLE_PNG_MESSAGE];
} spindle_png_messages;

static void spindle_png_error(png_structp png, png_const_charp text) {
  spindle_png_messages *messages = png_get_error_ptr(png);
  snprintf(messages->message, SPINDLE_PNG_MESSAGE, "%s", text != NULL ? text : "unknown libpng error");
  png_longjmp(png, 1);
}

static void spindle_png_warning(png_structp png, png_const_charp text) {
  // Warnings (an odd iCCP profile, a bad ancillary CRC) never print and never fail a decode.
  (void)png;
  (void)text;
}

struct spindle_png_decoder {
  spindle_png_messages messages;
  png_structp png;
  png_infop info;
  const uint8_t *data;
  size_t length;
  size_t offset;
  int stage;  // 0 created, 1 header read, 2 done, -1 failed
  int width, height, channels;
  char message[SPINDLE_PNG_MESSAGE + 32];
};

static void spindle_png_read(png_structp png, png_bytep out, size_t count) {
  spindle_png_decoder *decoder = png_get_io_ptr(png);
  if (count > decoder->length - decoder->offset) png_error(png, "unexpected end of file (truncated PNG)");
  memcpy(out, decoder->data + decoder->offset, count);
  decoder->offset += count;
}

spindle_png_decoder *spindle_png_decoder_create(const uint8_t *data, size_t length) {
  spindle_png_decoder *decoder = calloc(1, sizeof(spindle_png_decoder));
  if (decoder == NULL) return NULL;
  decoder->data = data;
  decoder->length = length;
  decoder->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &decoder->messages, spindle_png_error,
                                        spindle_png_warning);
  if (decoder->png == NULL) {
    free(decoder);
    return NULL;
  }
  decoder->info = png_create_info_struct(decoder->png);
  if (decoder->info == NULL) {
    png_destroy_read_struct(&decoder->png, NULL, NULL);
    free(decoder);
    return NULL;
  }
  png_set_read_fn(decoder->png, decoder, spindle_png_read);
  return decoder;
}

static int spindle_png_fail(spindle_png_decoder *decoder, int status, const char *message) {
  snprintf(decoder->message, sizeof decoder->message, "%s", message);
  decoder->stage = -1;
  return status;
}

int spindle_png_decoder_read_header(spindle_png_decoder *decoder, uint64_t max_pixels, int *width, int *height,
                                    int *channels) {
  if (decoder->stage != 0) return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "header already read");
  if (decoder->length < 8 || png_sig_cmp(decoder->data, 0, 8) != 0)
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, "not a PNG signature");
  png_structp png = decoder->png;
  png_infop info = decoder->info;
  if (setjmp(png_jmpbuf(png))) return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, decoder->messages.message);
  // Our own limit is the one that matters; lift libpng's 1,000,000-per-side default only as far as PNG allows.
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  *width = (int)w;
  *height = (int)h;
  uint64_t pixels = (uint64_t)w * (uint64_t)h;
  if (pixels > max_pixels) {
    snprintf(decoder->message, sizeof decoder->message, "%ux%u is %llu pixels, more than the limit of %llu",
             (unsigned)w, (unsigned)h, (unsigned long long)pixels, (unsigned long long)max_pixels);
    decoder->stage = -1;
    return SPINDLE_PNG_TOO_MANY_PIXELS;
  }
  int color = png_get_color_type(png, info);
  int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_scale_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  decoder->width = (int)w;
  decoder->height = (int)h;
  decoder->channels = png_get_channels(png, info);
  if (png_get_bit_depth(png, info) != 8 || decoder->channels < 1 || decoder->channels > 4 ||
      png_get_rowbytes(png, info) != (size_t)w * (size_t)decoder->channels)
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, "unexpected PNG layout after conversion");
  *width = decoder->width;
  *height = decoder->height;
  *channels = decoder->channels;
  decoder->stage = 1;
  return SPINDLE_PNG_OK;
}

int spindle_png_decoder_read_pixels(spindle_png_decoder *decoder, uint8_t *pixels, size_t capacity) {
  if (decoder->stage != 1) return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "header not read");
  size_t row_bytes = (size_t)decoder->width * (size_t)decoder->channels;
  if (capacity < row_bytes * (size_t)decoder->height)
    return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "pixel buffer too small");
  png_bytep *volatile rows = malloc(sizeof(png_bytep) * (size_t)decoder->height);
  if (rows == NULL) return spindle_png_fail(decoder, SPINDLE_PNG_NO_MEMORY, "out of memory");
  for (int y = 0; y < decoder->height; y++) rows[y] = pixels + row_bytes * (size_t)y;
  if (setjmp(png_jmpbuf(decoder->png))) {
    free(rows);
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, decoder->messages.message);
  }
  png_read_image(decoder->png, rows);
  free(rows);
  decoder->stage = 2;
  return SPINDLE_PNG_OK;
}

const char *spindle_png_decoder_message(const spindle_png_decoder *decoder) { return decoder->message; }

void spindle_png_decoder_destroy(spindle_png_decoder *decoder) {
  if (decoder == NULL) return;
  png_destroy_read_struct(&decoder->png, &decoder->info, NULL);
  free(decoder);
}

typedef struct {
  spindle_png_messages messages;
  uint8_t *buffer;
  size_t length;
  size_t capacity;
} spindle_png_sink;

static void spindle_png_write(png_structp png, png_bytep data, size_t count) {
  spindle_png_sink *sink = png_get_io_ptr(png);
  if (count > sink->capacity - sink->length) {
    size_t capacity = sink->capacity < 65536 ? 65536 : sink->capacity;
    while (capacity - sink->length < count) {
      if (capacity > SIZE_MAX / 2) png_error(png, "output too large");
      capacity *= 2;
    }
    uint8_t *grown = realloc(sink->buffer, capacity);
    if (grown == NULL) png_error(png, "out of memory");
    sink->buffer = grown;
    sink->capacity = capacity;
  }
  memcpy(sink->buffer + sink->length, data, count);
  sink->length += count;
}

static void spindle_png_flush(png_structp png) { (void)png; }

int spindle_png_encode(const uint8_t *pixels, int width, int height, int channels, int compression, int interlaced,
                       uint8_t **output, size_t *output_length, char *message, size_t capacity) {
  *output = NULL;
  *output_length = 0;
  static const int color_types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                    PNG_COLOR_TYPE_RGB_ALPHA};
  if (width <= 0 || height <= 0 || channels < 1 || channels > 4) {
    snprintf(message, capacity, "cannot encode a %dx%d image with %d channels as PNG", width, height, channels);
    return SPINDLE_PNG_MISUSE;
  }
  spindle_png_sink *sink = calloc(1, sizeof(spindle_png_sink));
  if (sink == NULL) {
    snprintf(message, capacity, "out of memory");
    return SPINDLE_PNG_NO_MEMORY;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink->messages, spindle_png_error,
                                            spindle_png_warning);
  png_infop info = png == NULL ? NULL : png_create_info_struct(png);
  if (info == NULL) {
    png_destroy_write_struct(&png, NULL);
    free(sink);
    snprintf(message, capacity, "out of memory");
    return SPINDLE_PNG_NO_MEMORY;
  }
  png_bytep *volatile rows = NULL;
  if (setjmp(png_jmpbuf(png))) {
    snprintf(message, capacity, "%s", sink->messages.message);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(sink->buffer);
    free(sink);
    return SPINDLE_PNG_CORRUPT;
  }
  png_set_write_fn(png, sink, spindle_png_write, spindle_png_flush);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, color_types[channels - 1],
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (compression >= 0 && compression <= 9) png_set_compression_level(png, compression);
  rows = malloc(sizeof(png_bytep) * (size_t)height);
  if (rows == NULL) png_error(png, "out of memory");
  size_t row_bytes = (size_t)width * (size_t)channels;
  for (int y = 0; y < height; y++) rows[y] = (png_bytep)(pixels + row_bytes * (size_t)y);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  free(rows);
  *output = sink->buffer;
  *output_length = sink->length;
  free(sink);
  return SPINDLE_PNG_OK;
}

void spindle_png_free(void *buffer) { free(buffer); }
