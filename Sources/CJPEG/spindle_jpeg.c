#include "spindle_jpeg.h"
int spindle_jpeg_placeholder(void) { return 0; }
