#ifndef SPINDLE_SIGNALS_H
#define SPINDLE_SIGNALS_H

/// Signals delivered through a self-pipe: a `sigaction` handler writes the signal's number as one byte to a pipe,
/// and a thread of the program reads the pipe and reacts outside signal context.
///
/// The handler is in force when `spindle_signals_catch` returns, whichever thread the kernel picks and whatever
/// its signal mask. A Dispatch signal source is not: the program must ignore the signal first (or its default
/// action ends the process), and the source registers asynchronously, so a signal in between is discarded
/// (measured on Linux: 100 of 100 signals sent right after `resume()` were lost).

/// Creates the pipe (once; later calls return the same descriptor). Returns the read end, or -1 with `errno` set.
/// Both ends are close-on-exec; the write end is non-blocking, so a handler never blocks on a full pipe.
int spindle_signals_open(void);

/// Sends `signo` into the pipe from now on (SA_RESTART, so interrupted system calls resume). Returns 0, or -1
/// with `errno` set (also when `spindle_signals_open` has not succeeded).
int spindle_signals_catch(int signo);

/// Gives `signo` its default disposition back. Returns 0, or -1 with `errno` set.
int spindle_signals_restore_default(int signo);

#endif
