// libpng reports errors by longjmp; this shim catches them at every entry point, keeps the message
// instead of printing it, and silences warnings.
#include "spindle_png.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <limits.h>
#include <png.h>

#define SPINDLE_PNG_MESSAGE 256

/// The most libpng warnings kept per decode or encode (the first ones).
#define SPINDLE_PNG_WARNINGS 8

typedef struct {
  char message[SPINDLE_PNG_MESSAGE];
  /// libpng's warnings, in order: a chunk it left out says so here ("tEXt: CRC error").
  char warnings[SPINDLE_PNG_WARNINGS][SPINDLE_PNG_MESSAGE];
  int warning_count;
  /// How many warnings libpng gave in all, kept or not.
  int warning_total;
  /// The latest warning, and the latest about an iCCP chunk, whatever the cap: a profile left out is named with its
  /// reason even after eight other warnings.
  char last_warning[SPINDLE_PNG_MESSAGE];
  char icc_warning[SPINDLE_PNG_MESSAGE];
  /// Whether the image data's zlib checksum (Adler-32) failed in a warning: libpng gives the failure as a warning,
  /// not an error, when the checksum sits in an IDAT chunk of its own, after the data it covers.
  int data_check_failed;
} spindle_png_messages;

static void spindle_png_error(png_structp png, png_const_charp text) {
  spindle_png_messages *messages = png_get_error_ptr(png);
  snprintf(messages->message, SPINDLE_PNG_MESSAGE, "%s", text != NULL ? text : "unknown libpng error");
  png_longjmp(png, 1);
}

static void spindle_png_warning(png_structp png, png_const_charp text) {
  // Warnings (an odd iCCP profile, a bad ancillary CRC) never print and never fail a decode; they are kept, so
  // that a chunk libpng left out can be reported.
  spindle_png_messages *messages = png_get_error_ptr(png);
  const char *shown = text != NULL ? text : "";
  if (messages->warning_count < SPINDLE_PNG_WARNINGS) {
    snprintf(messages->warnings[messages->warning_count], SPINDLE_PNG_MESSAGE, "%s", shown);
    messages->warning_count++;
  }
  if (messages->warning_total < INT_MAX) messages->warning_total++;
  snprintf(messages->last_warning, SPINDLE_PNG_MESSAGE, "%s", shown);
  if (strncmp(shown, "iCCP", 4) == 0) snprintf(messages->icc_warning, SPINDLE_PNG_MESSAGE, "%s", shown);
  if (strstr(shown, "incorrect data check") != NULL) messages->data_check_failed = 1;
}

struct spindle_png_decoder {
  spindle_png_messages messages;
  png_structp png;
  png_infop info;
  const uint8_t *data;
  size_t length;
  size_t offset;
  int stage;  // 0 created, 1 header read, 2 done, -1 failed
  int width, height, channels, depth, interlaced;
  /// After read_pixels: SPINDLE_PNG_TRUNCATED or SPINDLE_PNG_CORRUPT when the pixels are incomplete (lenient),
  /// the first row not decoded (-1: an interlaced image, whose every row may be incomplete), 0 when whole.
  int damage;
  int damage_row;
  /// Whether the file holds an iCCP chunk (before its usable end), whatever libpng made of it.
  int has_iccp_chunk;
  /// Whether the chunks after the image data (and IEND) were read, so their metadata is known.
  int read_end;
  char message[SPINDLE_PNG_MESSAGE + 32];
};

static void spindle_png_read(png_structp png, png_bytep out, size_t count) {
  spindle_png_decoder *decoder = png_get_io_ptr(png);
  if (count > decoder->length - decoder->offset) png_error(png, "unexpected end of file (truncated PNG)");
  memcpy(out, decoder->data + decoder->offset, count);
  decoder->offset += count;
}

/// Where the chunk structure of `data` ends: the start of the first chunk other than IDAT whose declared length
/// runs past the end of the data, or `length` when every chunk fits.
///
/// libpng allocates (and zeroes) a chunk's declared length before reading it: a 300-byte file declaring a
/// 1.6 GB text chunk costs 1.6 GB (found by Scripts/fuzz-decoders.sh). Ending the data before such a chunk
/// turns it into the truncation it is, before anything is allocated. IDAT is read in small pieces, so a cut
/// IDAT keeps its rows for a lenient decode.
/// Also sets *has_iccp when a whole iCCP chunk comes before that end.
static size_t spindle_png_usable_length(const uint8_t *data, size_t length, int *has_iccp) {
  size_t offset = 8;
  *has_iccp = 0;
  // Bytes after IEND are not part of the image (libpng never reads them): an iCCP chunk there is no profile left out.
  int ended = 0;
  while (offset + 8 <= length) {
    uint32_t chunk = (uint32_t)data[offset] << 24 | (uint32_t)data[offset + 1] << 16 | (uint32_t)data[offset + 2] << 8 |
                     (uint32_t)data[offset + 3];
    if (chunk > 0x7fffffffu) return length;  // libpng refuses it before allocating
    int idat = memcmp(data + offset + 4, "IDAT", 4) == 0;
    if ((size_t)chunk + 12 > length - offset) return idat ? length : offset;
    if (!ended && memcmp(data + offset + 4, "iCCP", 4) == 0) *has_iccp = 1;
    if (memcmp(data + offset + 4, "IEND", 4) == 0) ended = 1;
    offset += (size_t)chunk + 12;
  }
  return length;
}

spindle_png_decoder *spindle_png_decoder_create(const uint8_t *data, size_t length) {
  spindle_png_decoder *decoder = calloc(1, sizeof(spindle_png_decoder));
  if (decoder == NULL) return NULL;
  decoder->data = data;
  decoder->length = spindle_png_usable_length(data, length, &decoder->has_iccp_chunk);
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
  // Compressed data is read 1 KiB at a time, so a file cut short decodes (leniently) up to the row the cut is in,
  // and the rows reported missing are the rows really missing.
  png_set_compression_buffer_size(decoder->png, 1024);
  return decoder;
}

static int spindle_png_fail(spindle_png_decoder *decoder, int status, const char *message) {
  snprintf(decoder->message, sizeof decoder->message, "%s", message);
  decoder->stage = -1;
  return status;
}

int spindle_png_decoder_read_header(spindle_png_decoder *decoder, uint64_t max_pixels, int keep_16_bits,
                                    int *width, int *height, int *channels, int *bit_depth) {
  if (decoder->stage != 0) return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "header already read");
  if (decoder->length < 8 || png_sig_cmp(decoder->data, 0, 8) != 0)
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, "not a PNG signature");
  png_structp png = decoder->png;
  png_infop info = decoder->info;
  if (setjmp(png_jmpbuf(png))) {
    // The size is known once IHDR was read, so a file cut in its header still says how many rows are missing.
    *width = (int)png_get_image_width(png, info);
    *height = (int)png_get_image_height(png, info);
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, decoder->messages.message);
  }
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
  if (depth == 16 && !keep_16_bits) png_set_scale_16(png);
  if (depth == 16 && keep_16_bits) {
    // 16-bit samples in the host's byte order, so the caller reads them as uint16_t.
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe == 1) png_set_swap(png);
  }
  decoder->interlaced = png_set_interlace_handling(png) > 1;
  // The layout the transformations above produce, worked out here: png_read_update_info would allocate (and zero)
  // two rows, and a header only (the batch's memory estimate) must cost nothing whatever the width: a 300-byte
  // file declaring 2147483647x1 cost 6 GB. read_pixels calls it and checks that libpng agrees.
  int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  switch (color) {
  case PNG_COLOR_TYPE_GRAY: decoder->channels = has_trns ? 2 : 1; break;
  case PNG_COLOR_TYPE_GRAY_ALPHA: decoder->channels = 2; break;
  case PNG_COLOR_TYPE_PALETTE:
  case PNG_COLOR_TYPE_RGB: decoder->channels = has_trns ? 4 : 3; break;
  case PNG_COLOR_TYPE_RGB_ALPHA: decoder->channels = 4; break;
  default: return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, "unknown PNG colour type");
  }
  decoder->depth = depth == 16 && keep_16_bits ? 16 : 8;
  decoder->width = (int)w;
  decoder->height = (int)h;
  *width = decoder->width;
  *height = decoder->height;
  *channels = decoder->channels;
  *bit_depth = decoder->depth;
  decoder->stage = 1;
  return SPINDLE_PNG_OK;
}

int spindle_png_decoder_read_pixels(spindle_png_decoder *decoder, uint8_t *pixels, size_t capacity, int lenient) {
  if (decoder->stage != 1) return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "header not read");
  size_t row_bytes = (size_t)decoder->width * (size_t)decoder->channels * (size_t)(decoder->depth / 8);
  if (capacity < row_bytes * (size_t)decoder->height)
    return spindle_png_fail(decoder, SPINDLE_PNG_MISUSE, "pixel buffer too small");
  // Row by row, so that a failure knows how many rows were whole. Rows never decoded are zero.
  memset(pixels, 0, row_bytes * (size_t)decoder->height);
  volatile int rows_done = 0;
  volatile int pixels_done = 0;
  volatile int reading = 0;
  if (setjmp(png_jmpbuf(decoder->png))) {
    // Before any data was read (libpng could not set up its rows): no pixel to keep, lenient or not.
    if (!reading) return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, decoder->messages.message);
    int truncated = strstr(decoder->messages.message, "end of file") != NULL ||
                    strstr(decoder->messages.message, "Not enough image data") != NULL;
    int status = truncated ? SPINDLE_PNG_TRUNCATED : SPINDLE_PNG_CORRUPT;
    // A checksum of the image data that fails (an IDAT chunk's CRC, zlib's Adler-32) is found at the end of the
    // data it covers, even after the last row: the damage may be in any row.
    int checksum = strstr(decoder->messages.message, "IDAT: CRC error") != NULL ||
                   strstr(decoder->messages.message, "incorrect data check") != NULL ||
                   decoder->messages.data_check_failed;
    if (checksum) {
      decoder->damage = status;
      decoder->damage_row = -1;
    } else if (pixels_done) {
      // Every row is there; only what follows the image data (text, the end marker) is cut or damaged.
      decoder->damage = status;
      decoder->damage_row = decoder->height;
    } else {
      decoder->damage = status;
      decoder->damage_row = decoder->interlaced ? -1 : rows_done;
    }
    snprintf(decoder->message, sizeof decoder->message, "%s", decoder->messages.message);
    if (!lenient) {
      decoder->stage = -1;
      return status;
    }
    decoder->stage = 2;
    return SPINDLE_PNG_OK;
  }
  png_read_update_info(decoder->png, decoder->info);
  if (png_get_channels(decoder->png, decoder->info) != decoder->channels ||
      png_get_bit_depth(decoder->png, decoder->info) != decoder->depth ||
      png_get_rowbytes(decoder->png, decoder->info) != row_bytes)
    return spindle_png_fail(decoder, SPINDLE_PNG_CORRUPT, "unexpected PNG layout after conversion");
  reading = 1;
  int passes = decoder->interlaced ? PNG_INTERLACE_ADAM7_PASSES : 1;
  for (int pass = 0; pass < passes; pass++) {
    for (int y = 0; y < decoder->height; y++) {
      png_read_row(decoder->png, pixels + row_bytes * (size_t)y, NULL);
      if (pass == passes - 1) rows_done = y + 1;
    }
  }
  pixels_done = 1;
  // The chunks after the image data hold metadata too (text, eXIf), and a missing end marker means the file
  // was cut short.
  png_read_end(decoder->png, decoder->info);
  decoder->read_end = 1;
  if (decoder->messages.data_check_failed) {
    // The image data's checksum failed (given as a warning: see spindle_png_messages): the damage may be in any row.
    decoder->damage = SPINDLE_PNG_CORRUPT;
    decoder->damage_row = -1;
    snprintf(decoder->message, sizeof decoder->message, "IDAT: incorrect data check (the zlib checksum of the pixels)");
    if (!lenient) {
      decoder->stage = -1;
      return SPINDLE_PNG_CORRUPT;
    }
  }
  decoder->stage = 2;
  return SPINDLE_PNG_OK;
}

int spindle_png_decoder_damage(const spindle_png_decoder *decoder, int *first_row) {
  *first_row = decoder->damage_row;
  return decoder->damage;
}

const uint8_t *spindle_png_decoder_icc(const spindle_png_decoder *decoder, size_t *length, const char **name) {
  png_charp profile_name = NULL;
  png_bytep profile = NULL;
  png_uint_32 profile_length = 0;
  int compression = 0;
  *length = 0;
  *name = NULL;
  if (decoder->stage < 1 || !png_get_valid(decoder->png, decoder->info, PNG_INFO_iCCP)) return NULL;
  if (png_get_iCCP(decoder->png, decoder->info, &profile_name, &compression, &profile, &profile_length) == 0)
    return NULL;
  *length = profile_length;
  *name = profile_name;
  return profile;
}

int spindle_png_decoder_warning_count(const spindle_png_decoder *decoder) {
  return decoder->messages.warning_count;
}

int spindle_png_decoder_warning_total(const spindle_png_decoder *decoder) { return decoder->messages.warning_total; }

const char *spindle_png_decoder_warning(const spindle_png_decoder *decoder, int index) {
  if (index < 0 || index >= decoder->messages.warning_count) return NULL;
  return decoder->messages.warnings[index];
}

const char *spindle_png_decoder_dropped_icc(const spindle_png_decoder *decoder) {
  if (decoder->stage < 1 || !decoder->has_iccp_chunk || png_get_valid(decoder->png, decoder->info, PNG_INFO_iCCP))
    return NULL;
  const char *warning = decoder->messages.icc_warning;
  return warning[0] ? warning : "iCCP: refused";
}

const uint8_t *spindle_png_decoder_exif(const spindle_png_decoder *decoder, size_t *length) {
  png_bytep exif = NULL;
  png_uint_32 exif_length = 0;
  *length = 0;
  if (decoder->stage < 1 || !png_get_valid(decoder->png, decoder->info, PNG_INFO_eXIf)) return NULL;
  if (png_get_eXIf_1(decoder->png, decoder->info, &exif_length, &exif) == 0) return NULL;
  *length = exif_length;
  return exif;
}

int spindle_png_decoder_text_count(const spindle_png_decoder *decoder) {
  if (decoder->stage < 1) return 0;
  png_textp text = NULL;
  return png_get_text(decoder->png, decoder->info, &text, NULL);
}

int spindle_png_decoder_text(const spindle_png_decoder *decoder, int index, spindle_png_text *out) {
  png_textp text = NULL;
  int count = decoder->stage < 1 ? 0 : png_get_text(decoder->png, decoder->info, &text, NULL);
  if (index < 0 || index >= count) return 0;
  png_const_textp entry = &text[index];
  out->compression = entry->compression;
  out->keyword = entry->key;
  out->language = entry->lang;
  out->translated_keyword = entry->lang_key;
  out->text = entry->text;
  out->text_length = entry->compression > 0 ? entry->itxt_length : entry->text_length;
  if (out->text == NULL) out->text_length = 0;
  return 1;
}

void spindle_png_decoder_colour(const spindle_png_decoder *decoder, spindle_png_colour *out) {
  memset(out, 0, sizeof *out);
  if (decoder->stage < 1) return;
  png_structp png = decoder->png;
  png_infop info = decoder->info;
  png_fixed_point gamma = 0;
  if (png_get_valid(png, info, PNG_INFO_gAMA) && png_get_gAMA_fixed(png, info, &gamma)) {
    out->has_gamma = 1;
    out->gamma = gamma;
  }
  int intent = 0;
  if (png_get_valid(png, info, PNG_INFO_sRGB) && png_get_sRGB(png, info, &intent)) {
    out->has_srgb = 1;
    out->srgb_intent = intent;
  }
  png_fixed_point c[8];
  if (png_get_valid(png, info, PNG_INFO_cHRM) &&
      png_get_cHRM_fixed(png, info, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7])) {
    out->has_chrm = 1;
    for (int i = 0; i < 8; i++) out->chrm[i] = c[i];
  }
  png_uint_32 x = 0, y = 0;
  int unit = 0;
  if (png_get_valid(png, info, PNG_INFO_pHYs) && png_get_pHYs(png, info, &x, &y, &unit)) {
    out->has_phys = 1;
    out->phys_x = x;
    out->phys_y = y;
    out->phys_unit = unit;
  }
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

/// Sets the chunks for `metadata`. A profile libpng refuses (benign errors: a warning, not a failure) is left out,
/// and `notes` (capacity bytes, lines ending in '\n') says so with libpng's reason.
static void spindle_png_set_metadata(png_structp png, png_infop info, const spindle_png_metadata *metadata,
                                     char *notes, size_t capacity) {
  if (metadata->icc != NULL && metadata->icc_length > 0) {
    // The profile's first four bytes give its size. Bytes past it (padding) are not part of the profile, and
    // libpng refuses a length that does not match.
    size_t length = metadata->icc_length;
    if (length >= 132) {
      size_t declared = (size_t)metadata->icc[0] << 24 | (size_t)metadata->icc[1] << 16 |
                        (size_t)metadata->icc[2] << 8 | (size_t)metadata->icc[3];
      if (declared >= 132 && declared < length) length = declared;
    }
    const spindle_png_messages *messages = png_get_error_ptr(png);
    int warnings_before = messages->warning_total;
    png_set_iCCP(png, info, metadata->icc_name != NULL && metadata->icc_name[0] ? metadata->icc_name : "ICC profile",
                 PNG_COMPRESSION_TYPE_BASE, metadata->icc, (png_uint_32)length);
    if (!png_get_valid(png, info, PNG_INFO_iCCP)) {
      // libpng's reason is the warning png_set_iCCP gave, if any.
      const char *reason = messages->warning_total > warnings_before ? messages->last_warning : "no reason given";
      size_t used = strlen(notes);
      snprintf(notes + used, capacity - used, "the ICC profile was left out: libpng refused it (libpng: %s)\n",
               reason);
    }
  }
  if (metadata->exif != NULL && metadata->exif_length > 0)
    png_set_eXIf_1(png, info, (png_uint_32)metadata->exif_length, (png_bytep)metadata->exif);
  if (metadata->colour.has_gamma) png_set_gAMA_fixed(png, info, metadata->colour.gamma);
  if (metadata->colour.has_chrm) {
    const int *c = metadata->colour.chrm;
    png_set_cHRM_fixed(png, info, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
  }
  if (metadata->colour.has_srgb && metadata->icc == NULL) png_set_sRGB(png, info, metadata->colour.srgb_intent);
  if (metadata->colour.has_phys)
    png_set_pHYs(png, info, metadata->colour.phys_x, metadata->colour.phys_y, metadata->colour.phys_unit);
  if (metadata->text_count > 0 && metadata->texts != NULL) {
    png_textp texts = calloc((size_t)metadata->text_count, sizeof(png_text));
    if (texts == NULL) png_error(png, "out of memory");
    for (int i = 0; i < metadata->text_count; i++) {
      const spindle_png_text *source = &metadata->texts[i];
      texts[i].compression = source->compression;
      texts[i].key = (png_charp)source->keyword;
      texts[i].text = (png_charp)source->text;
      texts[i].lang = (png_charp)source->language;
      texts[i].lang_key = (png_charp)source->translated_keyword;
      if (source->compression > 0)
        texts[i].itxt_length = source->text_length;
      else
        texts[i].text_length = source->text_length;
    }
    png_set_text(png, info, texts, metadata->text_count);
    free(texts);
  }
}

int spindle_png_encode(const uint8_t *pixels, int width, int height, int channels, int bit_depth, int compression,
                       int interlaced, const spindle_png_metadata *metadata, uint8_t **output, size_t *output_length,
                       char *message, size_t capacity, char *notes, size_t notes_capacity) {
  *output = NULL;
  *output_length = 0;
  if (notes != NULL && notes_capacity > 0) notes[0] = 0;
  char no_notes[1] = {0};
  if (notes == NULL || notes_capacity == 0) {
    notes = no_notes;
    notes_capacity = sizeof no_notes;
  }
  static const int color_types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                    PNG_COLOR_TYPE_RGB_ALPHA};
  if (width <= 0 || height <= 0 || channels < 1 || channels > 4 || (bit_depth != 8 && bit_depth != 16)) {
    snprintf(message, capacity, "cannot encode a %dx%d image with %d channels of %d bits as PNG", width, height,
             channels, bit_depth);
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
  // A metadata chunk libpng finds inconsistent (sRGB next to a non-sRGB profile) is left out, not fatal.
  png_set_benign_errors(png, 1);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, bit_depth, color_types[channels - 1],
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (compression >= 0 && compression <= 9) png_set_compression_level(png, compression);
  rows = malloc(sizeof(png_bytep) * (size_t)height);
  if (rows == NULL) png_error(png, "out of memory");
  size_t row_bytes = (size_t)width * (size_t)channels * (size_t)(bit_depth / 8);
  for (int y = 0; y < height; y++) rows[y] = (png_bytep)(pixels + row_bytes * (size_t)y);
  if (metadata != NULL) spindle_png_set_metadata(png, info, metadata, notes, notes_capacity);
  png_write_info(png, info);
  if (bit_depth == 16) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe == 1) png_set_swap(png);
  }
  png_write_image(png, rows);
  // Every chunk went before the image data with png_write_info. Given the info again, libpng 1.6 writes eXIf a
  // second time after IDAT (PNG allows one); without it, png_write_end writes only IEND.
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(rows);
  *output = sink->buffer;
  *output_length = sink->length;
  free(sink);
  return SPINDLE_PNG_OK;
}

void spindle_png_free(void *buffer) { free(buffer); }
