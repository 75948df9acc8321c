// libjpeg's default error manager calls exit(); this shim installs one that longjmps back to the
// entry point that called libjpeg, so corrupt input becomes a status code and a message.
#include "spindle_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

typedef struct {
  struct jpeg_error_mgr base;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  /// The first warning libjpeg reported (warnings never print).
  int warning_code;
} spindle_error_manager;

static void spindle_error_exit(j_common_ptr cinfo) {
  spindle_error_manager *manager = (spindle_error_manager *)cinfo->err;
  manager->base.format_message(cinfo, manager->message);
  longjmp(manager->jump, 1);
}

static void spindle_emit_message(j_common_ptr cinfo, int level) {
  spindle_error_manager *manager = (spindle_error_manager *)cinfo->err;
  if (level < 0) {
    // A warning: remember the first one, never print.
    if (manager->base.num_warnings == 0) {
      manager->warning_code = manager->base.msg_code;
      manager->base.format_message(cinfo, manager->message);
    }
    manager->base.num_warnings++;
  }
}

static void spindle_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void spindle_install_errors(spindle_error_manager *manager) {
  jpeg_std_error(&manager->base);
  manager->base.error_exit = spindle_error_exit;
  manager->base.emit_message = spindle_emit_message;
  manager->base.output_message = spindle_output_message;
  manager->message[0] = 0;
  manager->warning_code = -1;
}

/// Progressive JPEGs may hold any number of scans, each a full pass over the image; a hostile file
/// with thousands of tiny scans costs minutes of CPU. libjpeg-turbo's advice is to cap them.
#define SPINDLE_JPEG_MAX_SCANS 1000

struct spindle_jpeg_decoder {
  struct jpeg_decompress_struct info;
  spindle_error_manager errors;
  struct jpeg_progress_mgr progress;
  const uint8_t *data;
  size_t length;
  int stage;  // 0 created, 1 header read, 2 started, 3 done, -1 failed
  int cmyk;   // output is CMYK and must be converted to RGB
  int adobe_inverted;
  uint8_t *exif;
  size_t exif_length;
  char message[JMSG_LENGTH_MAX + 64];
};

static void spindle_scan_limit(j_common_ptr cinfo) {
  j_decompress_ptr info = (j_decompress_ptr)cinfo;
  if (info->input_scan_number > SPINDLE_JPEG_MAX_SCANS) {
    spindle_error_manager *manager = (spindle_error_manager *)cinfo->err;
    snprintf(manager->message, sizeof manager->message, "more than %d progressive scans (refused as a decompression bomb)",
             SPINDLE_JPEG_MAX_SCANS);
    longjmp(manager->jump, 1);
  }
}

spindle_jpeg_decoder *spindle_jpeg_decoder_create(const uint8_t *data, size_t length) {
  spindle_jpeg_decoder *decoder = calloc(1, sizeof(spindle_jpeg_decoder));
  if (decoder == NULL) return NULL;
  decoder->data = data;
  decoder->length = length;
  spindle_install_errors(&decoder->errors);
  decoder->info.err = &decoder->errors.base;
  if (setjmp(decoder->errors.jump)) {
    free(decoder);
    return NULL;
  }
  jpeg_create_decompress(&decoder->info);
  decoder->progress.progress_monitor = spindle_scan_limit;
  decoder->info.progress = &decoder->progress;
  return decoder;
}

static int spindle_fail(spindle_jpeg_decoder *decoder, int status, const char *message) {
  snprintf(decoder->message, sizeof decoder->message, "%s", message);
  decoder->stage = -1;
  return status;
}

int spindle_jpeg_decoder_read_header(spindle_jpeg_decoder *decoder, uint64_t max_pixels, int *width, int *height,
                                     int *channels) {
  if (decoder->stage != 0) return spindle_fail(decoder, SPINDLE_JPEG_MISUSE, "header already read");
  if (setjmp(decoder->errors.jump)) return spindle_fail(decoder, SPINDLE_JPEG_CORRUPT, decoder->errors.message);
  jpeg_mem_src(&decoder->info, decoder->data, (unsigned long)decoder->length);
  jpeg_save_markers(&decoder->info, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&decoder->info, TRUE);

  for (jpeg_saved_marker_ptr marker = decoder->info.marker_list; marker != NULL; marker = marker->next) {
    if (marker->marker == JPEG_APP0 + 1 && marker->data_length >= 6 && memcmp(marker->data, "Exif\0\0", 6) == 0) {
      decoder->exif = malloc(marker->data_length);
      if (decoder->exif == NULL) return spindle_fail(decoder, SPINDLE_JPEG_NO_MEMORY, "out of memory");
      memcpy(decoder->exif, marker->data, marker->data_length);
      decoder->exif_length = marker->data_length;
      break;
    }
  }

  *width = (int)decoder->info.image_width;
  *height = (int)decoder->info.image_height;
  uint64_t pixels = (uint64_t)decoder->info.image_width * (uint64_t)decoder->info.image_height;
  if (pixels > max_pixels) {
    snprintf(decoder->message, sizeof decoder->message, "%ux%u is %llu pixels, more than the limit of %llu",
             decoder->info.image_width, decoder->info.image_height, (unsigned long long)pixels,
             (unsigned long long)max_pixels);
    decoder->stage = -1;
    return SPINDLE_JPEG_TOO_MANY_PIXELS;
  }

  switch (decoder->info.jpeg_color_space) {
  case JCS_GRAYSCALE:
    decoder->info.out_color_space = JCS_GRAYSCALE;
    *channels = 1;
    break;
  case JCS_YCbCr:
  case JCS_RGB:
    decoder->info.out_color_space = JCS_RGB;
    *channels = 3;
    break;
  case JCS_CMYK:
  case JCS_YCCK:
    decoder->info.out_color_space = JCS_CMYK;
    decoder->cmyk = 1;
    decoder->adobe_inverted = decoder->info.saw_Adobe_marker;
    *channels = 3;
    break;
  default:
    return spindle_fail(decoder, SPINDLE_JPEG_UNSUPPORTED, "unsupported JPEG colour space");
  }
  decoder->stage = 1;
  return SPINDLE_JPEG_OK;
}

static void spindle_cmyk_to_rgb(const uint8_t *cmyk, uint8_t *rgb, JDIMENSION width, int inverted) {
  for (JDIMENSION x = 0; x < width; x++) {
    unsigned c = cmyk[4 * x], m = cmyk[4 * x + 1], y = cmyk[4 * x + 2], k = cmyk[4 * x + 3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    // Inverted (Adobe) samples store 255 - ink: the remaining light is sample * key / 255.
    rgb[3 * x] = (uint8_t)((c * k + 127) / 255);
    rgb[3 * x + 1] = (uint8_t)((m * k + 127) / 255);
    rgb[3 * x + 2] = (uint8_t)((y * k + 127) / 255);
  }
}

int spindle_jpeg_decoder_read_pixels(spindle_jpeg_decoder *decoder, uint8_t *pixels, size_t capacity) {
  if (decoder->stage != 1) return spindle_fail(decoder, SPINDLE_JPEG_MISUSE, "header not read");
  int channels = decoder->cmyk ? 3 : decoder->info.out_color_space == JCS_GRAYSCALE ? 1 : 3;
  size_t row_bytes = (size_t)decoder->info.image_width * (size_t)channels;
  if (capacity < row_bytes * decoder->info.image_height)
    return spindle_fail(decoder, SPINDLE_JPEG_MISUSE, "pixel buffer too small");
  uint8_t *volatile scratch = NULL;
  if (setjmp(decoder->errors.jump)) {
    free(scratch);
    return spindle_fail(decoder, SPINDLE_JPEG_CORRUPT, decoder->errors.message);
  }
  decoder->stage = 2;
  jpeg_start_decompress(&decoder->info);
  if (decoder->cmyk) {
    scratch = malloc((size_t)decoder->info.output_width * 4);
    if (scratch == NULL) return spindle_fail(decoder, SPINDLE_JPEG_NO_MEMORY, "out of memory");
  }
  while (decoder->info.output_scanline < decoder->info.output_height) {
    uint8_t *row = pixels + row_bytes * decoder->info.output_scanline;
    JSAMPROW rows[1] = {decoder->cmyk ? scratch : row};
    jpeg_read_scanlines(&decoder->info, rows, 1);
    if (decoder->cmyk) spindle_cmyk_to_rgb(scratch, row, decoder->info.output_width, decoder->adobe_inverted);
  }
  free(scratch);
  scratch = NULL;
  // A truncated file only raises a warning in libjpeg (it pads with gray); treat it as corruption.
  if (decoder->errors.warning_code == JWRN_JPEG_EOF) {
    return spindle_fail(decoder, SPINDLE_JPEG_CORRUPT, decoder->errors.message);
  }
  jpeg_finish_decompress(&decoder->info);
  decoder->stage = 3;
  return SPINDLE_JPEG_OK;
}

const char *spindle_jpeg_decoder_message(const spindle_jpeg_decoder *decoder) { return decoder->message; }

const uint8_t *spindle_jpeg_decoder_exif(const spindle_jpeg_decoder *decoder, size_t *length) {
  *length = decoder->exif_length;
  return decoder->exif;
}

int spindle_jpeg_decoder_is_progressive(const spindle_jpeg_decoder *decoder) {
  return decoder->info.progressive_mode ? 1 : 0;
}

void spindle_jpeg_decoder_destroy(spindle_jpeg_decoder *decoder) {
  if (decoder == NULL) return;
  jpeg_destroy_decompress(&decoder->info);
  free(decoder->exif);
  free(decoder);
}

typedef struct {
  struct jpeg_compress_struct info;
  spindle_error_manager errors;
} spindle_jpeg_encoder;

int spindle_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int progressive,
                        const uint8_t *exif, size_t exif_length, uint8_t **output, size_t *output_length,
                        char *message, size_t capacity) {
  *output = NULL;
  *output_length = 0;
  if (width <= 0 || height <= 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION || channels < 1 ||
      channels > 4) {
    snprintf(message, capacity, "cannot encode a %dx%d image with %d channels as JPEG", width, height, channels);
    return SPINDLE_JPEG_MISUSE;
  }
  if (exif_length > 65533 - 2) {
    snprintf(message, capacity, "EXIF block of %zu bytes does not fit in one JPEG marker", exif_length);
    return SPINDLE_JPEG_MISUSE;
  }
  spindle_jpeg_encoder *volatile encoder = calloc(1, sizeof(spindle_jpeg_encoder));
  if (encoder == NULL) {
    snprintf(message, capacity, "out of memory");
    return SPINDLE_JPEG_NO_MEMORY;
  }
  unsigned char *volatile buffer = NULL;
  volatile unsigned long buffer_length = 0;
  uint8_t *volatile scratch = NULL;
  spindle_install_errors(&encoder->errors);
  encoder->info.err = &encoder->errors.base;
  if (setjmp(encoder->errors.jump)) {
    snprintf(message, capacity, "%s", encoder->errors.message);
    jpeg_destroy_compress(&encoder->info);
    free(buffer);
    free(scratch);
    free(encoder);
    return SPINDLE_JPEG_CORRUPT;
  }
  jpeg_create_compress(&encoder->info);
  jpeg_mem_dest(&encoder->info, (unsigned char **)&buffer, (unsigned long *)&buffer_length);
  encoder->info.image_width = (JDIMENSION)width;
  encoder->info.image_height = (JDIMENSION)height;
  int gray = channels <= 2;
  encoder->info.input_components = gray ? 1 : 3;
  encoder->info.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&encoder->info);
  jpeg_set_quality(&encoder->info, quality < 1 ? 1 : quality > 100 ? 100 : quality, TRUE);
  if (progressive) jpeg_simple_progression(&encoder->info);
  if (exif != NULL && exif_length > 0) encoder->info.write_JFIF_header = FALSE;
  if (channels == 2 || channels == 4) {
    scratch = malloc((size_t)width * (size_t)(gray ? 1 : 3));
    if (scratch == NULL) ERREXIT(&encoder->info, JERR_OUT_OF_MEMORY);
  }
  jpeg_start_compress(&encoder->info, TRUE);
  if (exif != NULL && exif_length > 0) jpeg_write_marker(&encoder->info, JPEG_APP0 + 1, exif, (unsigned)exif_length);
  size_t row_bytes = (size_t)width * (size_t)channels;
  while (encoder->info.next_scanline < encoder->info.image_height) {
    const uint8_t *source = pixels + row_bytes * encoder->info.next_scanline;
    JSAMPROW rows[1];
    if (scratch != NULL) {
      // Drop alpha: JPEG has none.
      int keep = gray ? 1 : 3;
      for (int x = 0; x < width; x++) {
        for (int c = 0; c < keep; c++) scratch[x * keep + c] = source[x * channels + c];
      }
      rows[0] = scratch;
    } else {
      rows[0] = (JSAMPROW)source;
    }
    jpeg_write_scanlines(&encoder->info, rows, 1);
  }
  jpeg_finish_compress(&encoder->info);
  jpeg_destroy_compress(&encoder->info);
  free(scratch);
  free(encoder);
  *output = buffer;
  *output_length = buffer_length;
  return SPINDLE_JPEG_OK;
}

void spindle_jpeg_free(void *buffer) { free(buffer); }
