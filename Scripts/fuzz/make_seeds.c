// Writes a small seed corpus for the decoder fuzzer with the shims' own encoders: baseline, progressive and
// gray JPEGs with EXIF/XMP/ICC/COM markers; 8-bit, 16-bit, alpha and interlaced PNGs with every metadata chunk.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spindle_jpeg.h"
#include "spindle_png.h"

static void save(const char *folder, const char *name, const uint8_t *bytes, size_t length) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", folder, name);
  FILE *file = fopen(path, "wb");
  if (file == NULL) {
    perror(path);
    exit(1);
  }
  fwrite(bytes, 1, length, file);
  fclose(file);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_FOLDER\n", argv[0]);
    return 2;
  }
  enum { W = 24, H = 16 };
  static uint8_t pixels[W * H * 8];
  for (size_t i = 0; i < sizeof pixels; i++) pixels[i] = (uint8_t)(i * 37 + (i >> 5) * 11);
  static const uint8_t exif[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12,
                                 0,   3,   0,   0,   0, 1, 0, 6,   0, 0, 0, 0, 0, 0};
  static const char xmp[] = "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:RDF><rdf:Description tiff:Orientation=\"8\"/>"
                            "</rdf:RDF></x:xmpmeta>";
  uint8_t icc[200] = {0};
  memcpy(icc, "ICC_PROFILE\0\1\1", 14);
  icc[14 + 3] = 186;
  memcpy(icc + 14 + 16, "RGB XYZ ", 8);
  memcpy(icc + 14 + 36, "acsp", 4);
  spindle_jpeg_marker markers[] = {{0xE1, exif, sizeof exif},
                                   {0xE1, (const uint8_t *)xmp, sizeof xmp - 1},
                                   {0xE2, icc, sizeof icc},
                                   {0xFE, (const uint8_t *)"a comment", 9}};
  char message[256];
  uint8_t *output = NULL;
  size_t length = 0;
  struct {
    const char *name;
    int channels, progressive, markers, unit;
  } jpegs[] = {{"baseline.jpg", 3, 0, 4, 1}, {"progressive.jpg", 3, 1, 4, -1}, {"gray.jpg", 1, 0, 0, 2}};
  for (size_t i = 0; i < sizeof jpegs / sizeof jpegs[0]; i++) {
    if (spindle_jpeg_encode(pixels, W, H, jpegs[i].channels, 80, jpegs[i].progressive, markers,
                            (size_t)jpegs[i].markers, jpegs[i].unit, 72, 72, &output, &length, message,
                            sizeof message) != SPINDLE_JPEG_OK) {
      fprintf(stderr, "%s: %s\n", jpegs[i].name, message);
      return 1;
    }
    save(argv[1], jpegs[i].name, output, length);
    spindle_jpeg_free(output);
  }
  spindle_png_text texts[] = {{-1, "Title", NULL, NULL, "seed", 4},
                              {0, "Comment", NULL, NULL, "compressed text", 15},
                              {1, "XML:com.adobe.xmp", "", "", "<x:xmpmeta/>", 12}};
  spindle_png_metadata metadata = {0};
  metadata.exif = exif + 6;
  metadata.exif_length = sizeof exif - 6;
  metadata.texts = texts;
  metadata.text_count = 3;
  metadata.colour.has_gamma = 1;
  metadata.colour.gamma = 45455;
  metadata.colour.has_phys = 1;
  metadata.colour.phys_x = metadata.colour.phys_y = 2835;
  metadata.colour.phys_unit = 1;
  struct {
    const char *name;
    int channels, depth, interlaced;
  } pngs[] = {{"rgb.png", 3, 8, 0}, {"rgba16.png", 4, 16, 0}, {"gray-interlaced.png", 1, 8, 1}, {"ga16.png", 2, 16, 1}};
  for (size_t i = 0; i < sizeof pngs / sizeof pngs[0]; i++) {
    if (spindle_png_encode(pixels, W, H, pngs[i].channels, pngs[i].depth, 6, pngs[i].interlaced, &metadata, &output,
                           &length, message, sizeof message) != SPINDLE_PNG_OK) {
      fprintf(stderr, "%s: %s\n", pngs[i].name, message);
      return 1;
    }
    save(argv[1], pngs[i].name, output, length);
    spindle_png_free(output);
  }
  return 0;
}
