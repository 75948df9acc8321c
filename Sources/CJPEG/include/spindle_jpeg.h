#ifndef SPINDLE_JPEG_H
#define SPINDLE_JPEG_H
int spindle_jpeg_placeholder(void);
#endif
