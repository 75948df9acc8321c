#include "spindle_png.h"
int spindle_png_placeholder(void) { return 0; }
