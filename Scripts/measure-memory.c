// Writes COUNT valid RGB PNGs of WIDTH x HEIGHT (a gradient with fine texture, so the filter has work) into
// FOLDER, one row at a time with zlib, so even 100-megapixel files take almost no memory to make.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void put32(uint8_t *at, uint32_t value) {
  at[0] = (uint8_t)(value >> 24);
  at[1] = (uint8_t)(value >> 16);
  at[2] = (uint8_t)(value >> 8);
  at[3] = (uint8_t)value;
}

static void chunk(FILE *file, const char *type, const uint8_t *data, uint32_t length) {
  uint8_t header[8];
  put32(header, length);
  memcpy(header + 4, type, 4);
  fwrite(header, 1, 8, file);
  if (length > 0) fwrite(data, 1, length, file);
  uLong crc = crc32(0, (const Bytef *)type, 4);
  if (length > 0) crc = crc32(crc, data, length);
  uint8_t tail[4];
  put32(tail, (uint32_t)crc);
  fwrite(tail, 1, 4, file);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s FOLDER COUNT WIDTH HEIGHT\n", argv[0]);
    return 2;
  }
  int count = atoi(argv[2]);
  uint32_t width = (uint32_t)atol(argv[3]), height = (uint32_t)atol(argv[4]);
  size_t row_bytes = (size_t)width * 3 + 1;
  uint8_t *row = malloc(row_bytes);
  uint8_t *out = malloc(1 << 20);
  if (row == NULL || out == NULL) return 1;
  for (int n = 0; n < count; n++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/frame-%d.png", argv[1], n);
    FILE *file = fopen(path, "wb");
    if (file == NULL) {
      perror(path);
      return 1;
    }
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, file);
    uint8_t ihdr[13];
    put32(ihdr, width);
    put32(ihdr + 4, height);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;
    chunk(file, "IHDR", ihdr, 13);
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit(&z, 6);
    for (uint32_t y = 0; y < height; y++) {
      row[0] = 0;
      for (uint32_t x = 0; x < width; x++) {
        uint8_t texture = (uint8_t)(((x >> 3) ^ (y >> 3)) & 1) * 24;
        row[1 + 3 * x] = (uint8_t)(x * 200 / width + texture);
        row[2 + 3 * x] = (uint8_t)(y * 200 / height + texture);
        row[3 + 3 * x] = (uint8_t)(n * 40 + texture);
      }
      z.next_in = row;
      z.avail_in = (uInt)row_bytes;
      int flush = y + 1 == height ? Z_FINISH : Z_NO_FLUSH;
      do {
        z.next_out = out;
        z.avail_out = 1 << 20;
        deflate(&z, flush);
        uint32_t produced = (1 << 20) - z.avail_out;
        if (produced > 0) chunk(file, "IDAT", out, produced);
      } while (z.avail_out == 0 || (flush == Z_FINISH && z.avail_in > 0));
    }
    deflateEnd(&z);
    chunk(file, "IEND", NULL, 0);
    fclose(file);
  }
  return 0;
}
