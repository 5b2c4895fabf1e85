/* LD_PRELOAD shim: counts malloc calls and prints "mallocs N" at exit, so a
 * test can check that more iterations do not mean more allocations. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long calls;
static void* (*real_malloc)(size_t);

void* malloc(size_t size) {
  if (!real_malloc) real_malloc = (void* (*)(size_t))dlsym(RTLD_NEXT, "malloc");
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  return real_malloc(size);
}

__attribute__((destructor)) static void report(void) {
  char line[64];
  int n = snprintf(line, sizeof(line), "mallocs %lu\n", calls);
  if (write(2, line, (size_t)n) < 0) _exit(1);
}
