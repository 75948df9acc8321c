#include "spindle_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

// Written once under `lock` before any handler is installed; a handler only reads it.
static volatile sig_atomic_t write_end = -1;
static int read_end = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int signo) {
  // Only async-signal-safe calls here; errno belongs to the interrupted code.
  int saved = errno;
  unsigned char byte = (unsigned char)signo;
  if (write_end >= 0) {
    ssize_t ignored = write(write_end, &byte, 1);
    (void)ignored;  // a full pipe drops the byte: the reader has as many unread of its kind to act on
  }
  errno = saved;
}

static int set_flags(int fd, int fd_flags, int status_flags) {
  int current = fcntl(fd, F_GETFD);
  if (current < 0 || fcntl(fd, F_SETFD, current | fd_flags) < 0) return -1;
  if (status_flags) {
    current = fcntl(fd, F_GETFL);
    if (current < 0 || fcntl(fd, F_SETFL, current | status_flags) < 0) return -1;
  }
  return 0;
}

int spindle_signals_open(void) {
  pthread_mutex_lock(&lock);
  if (read_end < 0) {
    int fds[2];
    if (pipe(fds) == 0) {
      if (set_flags(fds[0], FD_CLOEXEC, 0) == 0 && set_flags(fds[1], FD_CLOEXEC, O_NONBLOCK) == 0) {
        read_end = fds[0];
        write_end = fds[1];
      } else {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
      }
    }
  }
  int result = read_end;
  pthread_mutex_unlock(&lock);
  return result;
}

int spindle_signals_catch(int signo) {
  if (write_end < 0) {
    errno = EBADF;
    return -1;
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(signo, &action, NULL);
}

int spindle_signals_restore_default(int signo) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  return sigaction(signo, &action, NULL);
}
