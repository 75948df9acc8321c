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
  /// The data ends before the last row (or before the end marker).
  SPINDLE_PNG_TRUNCATED = 6,
};

/// One text chunk: tEXt (compression -1), zTXt (0), iTXt (1 uncompressed, 2 compressed).
/// Strings are NUL-terminated except `text`, which is `text_length` bytes (UTF-8 for iTXt, Latin-1 otherwise).
typedef struct {
  int compression;
  const char *keyword;
  const char *language;
  const char *translated_keyword;
  const char *text;
  size_t text_length;
} spindle_png_text;

/// Colour and size chunks: gAMA and cHRM (PNG fixed point, ×100000), sRGB (rendering intent), pHYs.
typedef struct {
  int has_gamma, gamma;
  int has_srgb, srgb_intent;
  int has_chrm, chrm[8];
  int has_phys, phys_unit;
  uint32_t phys_x, phys_y;
} spindle_png_colour;

/// The metadata to write with an image; any pointer may be NULL. sRGB is left out when a profile is given.
typedef struct {
  const uint8_t *icc;
  size_t icc_length;
  const char *icc_name;
  const uint8_t *exif;
  size_t exif_length;
  const spindle_png_text *texts;
  int text_count;
  spindle_png_colour colour;
} spindle_png_metadata;

/// An in-progress decode: created, header read, pixels read, destroyed.
typedef struct spindle_png_decoder spindle_png_decoder;

/// Creates a decoder over `data` (not copied: it must outlive the decoder). NULL when out of memory.
spindle_png_decoder *spindle_png_decoder_create(const uint8_t *data, size_t length);

/// Reads the header and sets up 8-bit output: palette and low bit depths expand, tRNS becomes alpha,
/// 16-bit samples are scaled to 8 (or kept, in host byte order, with `keep_16_bits`), interlacing is undone.
/// Fills width, height, channels (1 to 4) and the output bit depth (8 or 16).
/// Refuses (SPINDLE_PNG_TOO_MANY_PIXELS) before any pixel buffer exists when width*height > max_pixels.
int spindle_png_decoder_read_header(spindle_png_decoder *decoder, uint64_t max_pixels, int keep_16_bits,
                                    int *width, int *height, int *channels, int *bit_depth);

/// Decodes all pixels into `pixels` (width*height*channels*bit_depth/8 bytes, rows top to bottom, no padding),
/// then reads the chunks after the image data up to IEND.
/// Data that ends early returns SPINDLE_PNG_TRUNCATED, other damage SPINDLE_PNG_CORRUPT; with `lenient` both
/// return OK (rows not decoded are zero) and spindle_png_decoder_damage says so.
int spindle_png_decoder_read_pixels(spindle_png_decoder *decoder, uint8_t *pixels, size_t capacity, int lenient);

/// After read_pixels: 0 when the file was whole, else SPINDLE_PNG_TRUNCATED or SPINDLE_PNG_CORRUPT with
/// `first_row` the first row not decoded (height when every row was, -1 for an interlaced image or a checksum that
/// fails while the rows are read: the damage may be in any of them).
int spindle_png_decoder_damage(const spindle_png_decoder *decoder, int *first_row);

/// The uncompressed ICC profile of an iCCP chunk and its name; NULL when none. Valid until destroy.
const uint8_t *spindle_png_decoder_icc(const spindle_png_decoder *decoder, size_t *length, const char **name);

/// The number of warnings libpng gave (at most 8 are kept), in order: a chunk it left out says so
/// ("tEXt: CRC error"). Valid until destroy.
int spindle_png_decoder_warning_count(const spindle_png_decoder *decoder);

/// The number of warnings libpng gave in all, kept or not (more than spindle_png_decoder_warning_count when some
/// were not kept).
int spindle_png_decoder_warning_total(const spindle_png_decoder *decoder);

/// Warning `index` in libpng's words (the chunk first: "zTXt: CRC error"); NULL past the end.
const char *spindle_png_decoder_warning(const spindle_png_decoder *decoder, int index);

/// When the file holds an iCCP chunk that libpng left out (bad CRC, a profile it refuses): libpng's warning for it;
/// NULL when there was none, or it was kept.
const char *spindle_png_decoder_dropped_icc(const spindle_png_decoder *decoder);

/// The eXIf chunk (a TIFF structure, no "Exif" prefix); NULL when none. Valid until destroy.
const uint8_t *spindle_png_decoder_exif(const spindle_png_decoder *decoder, size_t *length);

/// The number of text chunks (tEXt, zTXt, iTXt) read so far.
int spindle_png_decoder_text_count(const spindle_png_decoder *decoder);

/// Fills `out` with text chunk `index`; 0 past the end. Pointers are valid until destroy.
int spindle_png_decoder_text(const spindle_png_decoder *decoder, int index, spindle_png_text *out);

/// The gAMA, sRGB, cHRM and pHYs chunks read so far.
void spindle_png_decoder_colour(const spindle_png_decoder *decoder, spindle_png_colour *out);

/// The human message of the last failure ("" when none). Valid until the decoder is destroyed.
const char *spindle_png_decoder_message(const spindle_png_decoder *decoder);

/// Frees the decoder and everything it owns.
void spindle_png_decoder_destroy(spindle_png_decoder *decoder);

/// Encodes interleaved pixels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; 8-bit, or 16-bit in host byte order) as PNG.
/// `compression` is zlib's level 0-9 (-1 for libpng's default); `interlaced` writes Adam7; `metadata` may be NULL.
/// On success *output is a malloc'd buffer the caller releases with spindle_png_free.
/// On failure `message` (capacity bytes) receives a human message. An ICC profile longer than the size in its
/// header is written trimmed to that size; one libpng still refuses (an RGB profile on a gray image) is left out,
/// and `notes` (notes_capacity bytes; may be NULL) receives a line saying so, ending in '\n'.
int spindle_png_encode(const uint8_t *pixels, int width, int height, int channels, int bit_depth, int compression,
                       int interlaced, const spindle_png_metadata *metadata, uint8_t **output, size_t *output_length,
                       char *message, size_t capacity, char *notes, size_t notes_capacity);

/// Releases a buffer returned by spindle_png_encode.
void spindle_png_free(void *buffer);

#endif
