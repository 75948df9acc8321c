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
  /// The first warning that means pixels are missing or wrong (premature end of data, bad entropy code),
  /// the output row being produced when it came (-1: before any row, while buffering a multi-scan image),
  /// and libjpeg's message for it.
  int damage_code;
  int damage_row;
  char damage_message[JMSG_LENGTH_MAX];
  /// Whether the first damage warning ends the decode (longjmp) instead of letting libjpeg pad the rest with
  /// gray: set while a strict (not lenient) decode reads pixels, where the padded rows would only be thrown away.
  int stop_on_damage;
  /// Set when the decode was stopped that way, so the longjmp is told from libjpeg's own fatal errors.
  int stopped_on_damage;
  /// Whether the data ran out (JWRN_JPEG_EOF: libjpeg then reads a made-up end marker), and libjpeg's message.
  /// Not damage by itself: a file complete but for its end marker says so too, after its last data, or while
  /// the last row's entropy decoder reads ahead. Damage after it (the entropy decoder found no more bits, a restart
  /// marker never came) is the truncation; damage with no end of data before it is corrupt data.
  int eof_seen;
  char eof_message[JMSG_LENGTH_MAX];
  /// Whether the damage warning came after the data ran out: the file is cut short, not corrupt where it is.
  int damage_after_eof;
} spindle_error_manager;

/// Whether a warning means the decoded pixels are incomplete or wrong (libjpeg pads them with gray).
static int spindle_is_damage(int code) {
  return code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE || code == JWRN_ARITH_BAD_CODE ||
         code == JWRN_MUST_RESYNC;
}

/// Whether the recorded damage means the data ends early (rather than being wrong where it is): the entropy decoder
/// ran out of bits, or a restart marker was missing, after the file itself ended. JWRN_JPEG_EOF stands for itself
/// when a check after the decode found pixels missing (see spindle_jpeg_decoder_read_pixels).
static int spindle_is_truncation(const spindle_error_manager *manager) {
  if (manager->damage_code == JWRN_JPEG_EOF) return 1;
  return manager->damage_after_eof &&
         (manager->damage_code == JWRN_HIT_MARKER || manager->damage_code == JWRN_MUST_RESYNC);
}

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
    if (manager->base.msg_code == JWRN_JPEG_EOF && !manager->eof_seen) {
      manager->eof_seen = 1;
      manager->base.format_message(cinfo, manager->eof_message);
    }
    // Every warning is looked at, not only the first: a harmless one (extraneous bytes) may come before
    // the one that says pixels are missing.
    if (manager->damage_code < 0 && spindle_is_damage(manager->base.msg_code)) {
      manager->damage_code = manager->base.msg_code;
      manager->damage_after_eof = manager->eof_seen;
      manager->damage_row = -1;
      if (cinfo->is_decompressor) {
        // A single-scan image is decoded as it is read: rows from the current one on are gray. A multi-scan
        // (progressive) image is read whole first, so no row is known.
        j_decompress_ptr info = (j_decompress_ptr)cinfo;
        if (info->global_state >= 205 /* DSTATE_SCANNING */ && !jpeg_has_multiple_scans(info))
          manager->damage_row = (int)info->output_scanline;
      }
      // A truncation says so in the words for it ("Premature end of JPEG file"), not as corrupt data.
      if (spindle_is_truncation(manager))
        snprintf(manager->damage_message, sizeof manager->damage_message, "%s", manager->eof_message);
      else
        manager->base.format_message(cinfo, manager->damage_message);
      if (manager->stop_on_damage) {
        // Strict: the file is refused whatever comes next, so decoding (and paging in) every padded row of a
        // huge image that ends early would be wasted work. libjpeg allows leaving from a message as from an error.
        manager->base.num_warnings++;
        manager->stopped_on_damage = 1;
        longjmp(manager->jump, 1);
      }
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
  manager->damage_code = -1;
  manager->damage_row = -1;
  manager->damage_message[0] = 0;
  manager->stop_on_damage = 0;
  manager->stopped_on_damage = 0;
  manager->eof_seen = 0;
  manager->eof_message[0] = 0;
  manager->damage_after_eof = 0;
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
  /// Copies of the saved metadata markers: libjpeg frees its own when decompression finishes.
  int marker_count;
  int *marker_codes;
  uint8_t **marker_data;
  size_t *marker_lengths;
  /// The components (bit i: component index i) that some scan carried, seen by the progress monitor.
  unsigned scanned_components;
  /// After read_pixels: the data ran out only where the end marker (EOI) belongs, every pixel decoded.
  int end_missing;
  char message[JMSG_LENGTH_MAX + 64];
};

static void spindle_scan_limit(j_common_ptr cinfo) {
  j_decompress_ptr info = (j_decompress_ptr)cinfo;
  // Called before each step of reading a multi-scan image: the components of the scan being read.
  if (info->global_state >= 202 /* DSTATE_READY: decoding, not reading the header */ && info->comps_in_scan > 0) {
    spindle_jpeg_decoder *decoder = (spindle_jpeg_decoder *)((char *)info - offsetof(spindle_jpeg_decoder, info));
    for (int i = 0; i < info->comps_in_scan && i < MAX_COMPS_IN_SCAN; i++) {
      if (info->cur_comp_info[i] != NULL && info->cur_comp_info[i]->component_index < 32)
        decoder->scanned_components |= 1u << info->cur_comp_info[i]->component_index;
    }
  }
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
  // The metadata markers a photo carries: EXIF and XMP (APP1), ICC profile (APP2), IPTC (APP13), comments.
  jpeg_save_markers(&decoder->info, JPEG_APP0 + 1, 0xFFFF);
  jpeg_save_markers(&decoder->info, JPEG_APP0 + 2, 0xFFFF);
  jpeg_save_markers(&decoder->info, JPEG_APP0 + 13, 0xFFFF);
  jpeg_save_markers(&decoder->info, JPEG_COM, 0xFFFF);
  jpeg_read_header(&decoder->info, TRUE);

  int count = 0;
  for (jpeg_saved_marker_ptr marker = decoder->info.marker_list; marker != NULL; marker = marker->next) count++;
  if (count > 0) {
    decoder->marker_codes = calloc((size_t)count, sizeof(int));
    decoder->marker_data = calloc((size_t)count, sizeof(uint8_t *));
    decoder->marker_lengths = calloc((size_t)count, sizeof(size_t));
    if (decoder->marker_codes == NULL || decoder->marker_data == NULL || decoder->marker_lengths == NULL)
      return spindle_fail(decoder, SPINDLE_JPEG_NO_MEMORY, "out of memory");
    for (jpeg_saved_marker_ptr marker = decoder->info.marker_list; marker != NULL; marker = marker->next) {
      uint8_t *copy = malloc(marker->data_length > 0 ? marker->data_length : 1);
      if (copy == NULL) return spindle_fail(decoder, SPINDLE_JPEG_NO_MEMORY, "out of memory");
      memcpy(copy, marker->data, marker->data_length);
      decoder->marker_codes[decoder->marker_count] = marker->marker;
      decoder->marker_data[decoder->marker_count] = copy;
      decoder->marker_lengths[decoder->marker_count] = marker->data_length;
      decoder->marker_count++;
    }
  }
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

/// Whether a multi-scan image whose data ran out got every scan it needs: each component in some scan, and for a
/// progressive image every coefficient of every component to full precision (libjpeg's coef_bits, -1 for a
/// coefficient never sent, else the precision still missing). A file cut cleanly between two scans looks like one
/// that lacks only its end marker; this tells them apart. (An encoder may leave coefficients out on purpose; such
/// a file without its end marker is refused as cut short, as before.)
static int spindle_scans_complete(const spindle_jpeg_decoder *decoder) {
  const struct jpeg_decompress_struct *info = &decoder->info;
  for (int c = 0; c < info->num_components; c++) {
    if (info->progressive_mode) {
      if (info->coef_bits == NULL) return 0;
      for (int k = 0; k < DCTSIZE2; k++) {
        if (info->coef_bits[c][k] != 0) return 0;
      }
    } else if (c >= 32 || !(decoder->scanned_components & (1u << c))) {
      return 0;
    }
  }
  return 1;
}

int spindle_jpeg_decoder_read_pixels(spindle_jpeg_decoder *decoder, uint8_t *pixels, size_t capacity, int lenient) {
  if (decoder->stage != 1) return spindle_fail(decoder, SPINDLE_JPEG_MISUSE, "header not read");
  int channels = decoder->cmyk ? 3 : decoder->info.out_color_space == JCS_GRAYSCALE ? 1 : 3;
  size_t row_bytes = (size_t)decoder->info.image_width * (size_t)channels;
  if (capacity < row_bytes * decoder->info.image_height)
    return spindle_fail(decoder, SPINDLE_JPEG_MISUSE, "pixel buffer too small");
  uint8_t *volatile scratch = NULL;
  if (setjmp(decoder->errors.jump)) {
    free(scratch);
    if (decoder->errors.stopped_on_damage) {
      int status = spindle_is_truncation(&decoder->errors) ? SPINDLE_JPEG_TRUNCATED : SPINDLE_JPEG_DAMAGED;
      return spindle_fail(decoder, status, decoder->errors.damage_message);
    }
    return spindle_fail(decoder, SPINDLE_JPEG_CORRUPT, decoder->errors.message);
  }
  // Not lenient: stop at the first damage warning; the rows after it are never decoded (nor written).
  decoder->errors.stop_on_damage = !lenient;
  if (!lenient && decoder->errors.damage_code >= 0) {
    int status = spindle_is_truncation(&decoder->errors) ? SPINDLE_JPEG_TRUNCATED : SPINDLE_JPEG_DAMAGED;
    return spindle_fail(decoder, status, decoder->errors.damage_message);
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
  // Judged before finishing, which frees libjpeg's record of the scans (and may only add an end of data that comes
  // after the last scan, which loses nothing).
  int whole_scans = !decoder->info.arith_code &&
                    (!jpeg_has_multiple_scans(&decoder->info) || spindle_scans_complete(decoder));
  // A file that ends early (or whose entropy data is damaged) only raises a warning in libjpeg, which pads
  // the missing rows with gray. Looking for the end marker may raise it too, so finish before judging.
  if (decoder->errors.damage_code < 0) jpeg_finish_decompress(&decoder->info);
  if (decoder->errors.damage_code < 0 && decoder->errors.eof_seen) {
    // The data ran out, yet no row lacked data: a single-scan Huffman image was decoded whole from the file's own
    // bytes, and only its end marker is missing. Arithmetic decoding pads with zero bits without a warning, and a
    // multi-scan image may have lost whole scans, so those count as cut short unless every scan is there.
    if (whole_scans) {
      decoder->end_missing = 1;
    } else {
      decoder->errors.damage_code = JWRN_JPEG_EOF;
      decoder->errors.damage_row = -1;
      snprintf(decoder->errors.damage_message, sizeof decoder->errors.damage_message, "%s",
               decoder->errors.eof_message);
    }
  }
  if (decoder->errors.damage_code >= 0) {
    snprintf(decoder->message, sizeof decoder->message, "%s", decoder->errors.damage_message);
    if (!lenient) {
      decoder->stage = -1;
      return spindle_is_truncation(&decoder->errors) ? SPINDLE_JPEG_TRUNCATED : SPINDLE_JPEG_DAMAGED;
    }
  } else if (decoder->end_missing) {
    snprintf(decoder->message, sizeof decoder->message, "%s", decoder->errors.eof_message);
  }
  decoder->stage = 3;
  return SPINDLE_JPEG_OK;
}

int spindle_jpeg_decoder_damage(const spindle_jpeg_decoder *decoder, int *first_row) {
  *first_row = decoder->errors.damage_row;
  if (decoder->errors.damage_code < 0) return 0;
  return spindle_is_truncation(&decoder->errors) ? SPINDLE_JPEG_TRUNCATED : SPINDLE_JPEG_DAMAGED;
}

int spindle_jpeg_decoder_end_missing(const spindle_jpeg_decoder *decoder) { return decoder->end_missing; }

int spindle_jpeg_decoder_marker_count(const spindle_jpeg_decoder *decoder) { return decoder->marker_count; }

const uint8_t *spindle_jpeg_decoder_marker(const spindle_jpeg_decoder *decoder, int index, int *code, size_t *length) {
  if (index < 0 || index >= decoder->marker_count) {
    *code = 0;
    *length = 0;
    return NULL;
  }
  *code = decoder->marker_codes[index];
  *length = decoder->marker_lengths[index];
  return decoder->marker_data[index];
}

int spindle_jpeg_decoder_density(const spindle_jpeg_decoder *decoder, int *unit, int *x, int *y) {
  if (!decoder->info.saw_JFIF_marker) return 0;
  *unit = decoder->info.density_unit;
  *x = decoder->info.X_density;
  *y = decoder->info.Y_density;
  return 1;
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
  for (int i = 0; i < decoder->marker_count; i++) free(decoder->marker_data[i]);
  free(decoder->marker_codes);
  free(decoder->marker_data);
  free(decoder->marker_lengths);
  free(decoder);
}

typedef struct {
  struct jpeg_compress_struct info;
  spindle_error_manager errors;
} spindle_jpeg_encoder;

int spindle_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int progressive,
                        const spindle_jpeg_marker *markers, size_t marker_count, int density_unit, int x_density,
                        int y_density, uint8_t **output, size_t *output_length, char *message, size_t capacity) {
  *output = NULL;
  *output_length = 0;
  if (width <= 0 || height <= 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION || channels < 1 ||
      channels > 4) {
    snprintf(message, capacity, "cannot encode a %dx%d image with %d channels as JPEG", width, height, channels);
    return SPINDLE_JPEG_MISUSE;
  }
  // A marker's 16-bit length counts its own two bytes: one marker holds 65,533 bytes of payload.
  int has_exif = 0;
  for (size_t i = 0; i < marker_count; i++) {
    if (markers[i].length > SPINDLE_JPEG_MAX_MARKER_PAYLOAD || markers[i].code < JPEG_APP0 ||
        markers[i].code > JPEG_COM || (markers[i].length > 0 && markers[i].data == NULL)) {
      snprintf(message, capacity, "a metadata block of %zu bytes does not fit in one JPEG marker (at most %d)",
               markers[i].length, SPINDLE_JPEG_MAX_MARKER_PAYLOAD);
      return SPINDLE_JPEG_MISUSE;
    }
    if (markers[i].code == JPEG_APP0 + 1 && markers[i].length >= 6 && memcmp(markers[i].data, "Exif\0\0", 6) == 0)
      has_exif = 1;
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
  // JFIF (with the pixel density) comes first when a density is known; otherwise an EXIF file goes without it.
  if (density_unit >= 0 && density_unit <= 2 && x_density > 0 && y_density > 0 && x_density <= 65535 &&
      y_density <= 65535) {
    encoder->info.write_JFIF_header = TRUE;
    encoder->info.density_unit = (UINT8)density_unit;
    encoder->info.X_density = (UINT16)x_density;
    encoder->info.Y_density = (UINT16)y_density;
  } else if (has_exif) {
    encoder->info.write_JFIF_header = FALSE;
  }
  if (channels == 2 || channels == 4) {
    scratch = malloc((size_t)width * (size_t)(gray ? 1 : 3));
    if (scratch == NULL) ERREXIT(&encoder->info, JERR_OUT_OF_MEMORY);
  }
  jpeg_start_compress(&encoder->info, TRUE);
  for (size_t i = 0; i < marker_count; i++)
    jpeg_write_marker(&encoder->info, markers[i].code, markers[i].data, (unsigned)markers[i].length);
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
