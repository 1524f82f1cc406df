// The I/O floor of `gridfeed tables` on a many-file blend (docs/benchmarks.md): read every .idx
// once (pread, 4 MB buffer, one thread), make the output folders, write files of the given
// sizes from one buffer on 2 threads with their writeback started, fsync them on 8 threads and
// rename them. No table work at all. Not built by CMake (a measurement, run by hand):
//   gcc -O2 -pthread tests/bench/blend_io_floor.c -o /tmp/blend_io_floor
//   (cd OUT && find . -name '*.npy' -printf "%s /tmp/fl/%P\n") > /tmp/outs.txt   # a tables run
//   tr ' ' '\n' < blend.txt | awk 'NR%2==0{print $0".idx"}' > /tmp/idx.txt
//   mkdir -p /tmp/fl/train && chattr +T /tmp/fl/train && /tmp/blend_io_floor /tmp/outs.txt
//   /tmp/idx.txt
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static char **paths;
static long *sizes;
static int n;
static char *buf;
static int fds[4000];
static char tmp[4000][600];
static volatile int next_i = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int take() {
  pthread_mutex_lock(&mu);
  int i = next_i++;
  pthread_mutex_unlock(&mu);
  return i;
}
static void *writer(void *a) {
  for (int i; (i = take()) < n;) {
    snprintf(tmp[i], 600, "%s.tmp", paths[i]);
    int fd = open(tmp[i], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    long left = sizes[i];
    while (left > 0) {
      long k = left < (64 << 20) ? left : (64 << 20);
      if (write(fd, buf, k) != k) {
        perror("write");
        exit(1);
      }
      left -= k;
    }
    sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    fds[i] = fd;
  }
  return 0;
}
static void *syncer(void *a) {
  for (int i; (i = take()) < n;) {
    fsync(fds[i]);
    close(fds[i]);
  }
  return 0;
}
int main(int argc,
         char **argv) {  // argv[1]: list "size path" of outputs; argv[2]: list of .idx files
  FILE *f = fopen(argv[1], "r");
  paths = malloc(sizeof(char *) * 4000);
  sizes = malloc(sizeof(long) * 4000);
  char p[600];
  long s;
  while (n < 4000 && fscanf(f, "%ld %599s", &s, p) == 2) {
    sizes[n] = s;
    paths[n] = strdup(p);
    n++;
  }
  fclose(f);
  buf = malloc(64 << 20);
  memset(buf, 1, 64 << 20);
  double t0 = now();
  FILE *g = fopen(argv[2], "r");
  long rd = 0;
  char *rb = malloc(4 << 20);
  while (fscanf(g, "%599s", p) == 1) {
    int fd = open(p, O_RDONLY);
    ssize_t k;
    off_t off = 0;
    while ((k = pread(fd, rb, 4 << 20, off)) > 0) {
      off += k;
      rd += k;
    }
    close(fd);
  }
  fclose(g);
  double t1 = now();
  for (int i = 0; i < n; i++) {
    char d[600];
    strcpy(d, paths[i]);
    char *sl = strrchr(d, '/');
    *sl = 0;
    mkdir(d, 0755);
  }
  double t2 = now();
  pthread_t th[8];
  next_i = 0;
  pthread_create(&th[0], 0, writer, 0);
  writer(0);
  pthread_join(th[0], 0);
  double t3 = now();
  next_i = 0;
  for (int i = 0; i < 7; i++) pthread_create(&th[i], 0, syncer, 0);
  syncer(0);
  for (int i = 0; i < 7; i++) pthread_join(th[i], 0);
  for (int i = 0; i < n; i++) rename(tmp[i], paths[i]);
  double t4 = now();
  printf(
      "read idx %.1f MB %.3f s, mkdir %.3f s, write %d files %.3f s, sync+rename %.3f s, total "
      "%.3f s\n",
      rd / 1e6, t1 - t0, t2 - t1, n, t3 - t2, t4 - t3, t4 - t0);
}
