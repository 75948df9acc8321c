#ifndef SPINDLE_PNG_H
#define SPINDLE_PNG_H
int spindle_png_placeholder(void);
#endif
