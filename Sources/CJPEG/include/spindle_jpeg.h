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
  /// The data ends before the last row (libjpeg would pad the rest with gray).
  SPINDLE_JPEG_TRUNCATED = 6,
  /// The entropy-coded data is damaged (bad Huffman code, lost restart marker): some rows are wrong.
  SPINDLE_JPEG_DAMAGED = 7,
};

/// The most payload one JPEG marker holds: its 16-bit length counts the two length bytes themselves.
#define SPINDLE_JPEG_MAX_MARKER_PAYLOAD 65533

/// One marker to write after SOI (and after JFIF APP0, when written): APPn or COM.
typedef struct {
  int code;
  const uint8_t *data;
  size_t length;
} spindle_jpeg_marker;

/// An in-progress decode: created, header read, pixels read, destroyed.
typedef struct spindle_jpeg_decoder spindle_jpeg_decoder;

/// Creates a decoder over `data` (not copied: it must outlive the decoder). NULL when out of memory.
spindle_jpeg_decoder *spindle_jpeg_decoder_create(const uint8_t *data, size_t length);

/// Reads the header. On success fills width, height and output channels (1 gray or 3 RGB).
/// Refuses (SPINDLE_JPEG_TOO_MANY_PIXELS) before any pixel buffer exists when width*height > max_pixels.
int spindle_jpeg_decoder_read_header(spindle_jpeg_decoder *decoder, uint64_t max_pixels, int *width, int *height,
                                     int *channels);

/// Decodes all pixels into `pixels` (width*height*channels bytes, rows top to bottom, no padding).
/// Data that ends early returns SPINDLE_JPEG_TRUNCATED, damaged entropy data (bad codes, a marker inside the data)
/// SPINDLE_JPEG_DAMAGED, wherever the warning came, as soon as it comes: the rows from there on are never decoded,
/// and `pixels` keeps whatever they held. With `lenient` both return OK (gray-padded pixels) and
/// spindle_jpeg_decoder_damage says so. Data that ends only where its end marker (EOI) belongs, every pixel
/// decoded from the file's own bytes, returns OK: spindle_jpeg_decoder_end_missing says so.
int spindle_jpeg_decoder_read_pixels(spindle_jpeg_decoder *decoder, uint8_t *pixels, size_t capacity, int lenient);

/// After read_pixels: 0 when the pixels are whole, else SPINDLE_JPEG_TRUNCATED or SPINDLE_JPEG_DAMAGED with
/// `first_row` the first output row affected (-1 when unknown: a progressive or multi-scan image).
int spindle_jpeg_decoder_damage(const spindle_jpeg_decoder *decoder, int *first_row);

/// After read_pixels: 1 when every pixel was decoded but the file lacks its end marker (EOI), else 0.
/// The message is libjpeg's warning then ("Premature end of JPEG file").
int spindle_jpeg_decoder_end_missing(const spindle_jpeg_decoder *decoder);

/// The number of saved metadata markers (APP1, APP2, APP13, COM), valid after the header was read.
int spindle_jpeg_decoder_marker_count(const spindle_jpeg_decoder *decoder);

/// The saved marker at `index` (file order): its code (0xE1 APP1 ...) and payload. NULL past the end.
const uint8_t *spindle_jpeg_decoder_marker(const spindle_jpeg_decoder *decoder, int index, int *code, size_t *length);

/// The JFIF pixel density (unit 0 aspect only, 1 per inch, 2 per cm) when the file has a JFIF marker; 0 when not.
int spindle_jpeg_decoder_density(const spindle_jpeg_decoder *decoder, int *unit, int *x, int *y);

/// The human message of the last failure ("" when none). Valid until the decoder is destroyed.
const char *spindle_jpeg_decoder_message(const spindle_jpeg_decoder *decoder);

/// The payload of the first APP1 "Exif" marker seen in the header (NULL when none).
const uint8_t *spindle_jpeg_decoder_exif(const spindle_jpeg_decoder *decoder, size_t *length);

/// Whether the source was progressive (valid after the header was read).
int spindle_jpeg_decoder_is_progressive(const spindle_jpeg_decoder *decoder);

/// Frees the decoder and everything it owns.
void spindle_jpeg_decoder_destroy(spindle_jpeg_decoder *decoder);

/// Encodes interleaved 8-bit pixels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; alpha is dropped) as JPEG.
/// `markers` (each at most SPINDLE_JPEG_MAX_MARKER_PAYLOAD bytes) are written in order right after SOI, or after
/// the JFIF APP0 marker, which is written when a density is given (unit 0...2, x and y 1...65535), and left out
/// when there is no density and the markers hold EXIF.
/// On success *output is a malloc'd buffer the caller releases with spindle_jpeg_free.
/// On failure `message` (capacity bytes) receives a human message.
int spindle_jpeg_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int progressive,
                        const spindle_jpeg_marker *markers, size_t marker_count, int density_unit, int x_density,
                        int y_density, uint8_t **output, size_t *output_length, char *message, size_t capacity);

/// Releases a buffer returned by spindle_jpeg_encode.
void spindle_jpeg_free(void *buffer);

#endif
