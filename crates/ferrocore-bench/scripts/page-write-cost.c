/* What one page write costs the kernel, the way a commit of random puts writes its pages:
 * 700 random 4 KiB pages of an 11,000-page file (about what W3's txns of 1,000 random
 * puts dirty) rewritten 200 times, (a) one `pwrite` a page, as LMDB and ferrocore write
 * pages that are not next to each other; (b) one `pwritev` for 16 consecutive pages;
 * (c) copied into a writable shared map of the file, as under WRITE_MAP. Prints the
 * median ns per page of 5 rounds, the three ways alternated within each round.
 *
 *   gcc -O2 -o /tmp/page-write-cost crates/ferrocore-bench/scripts/page-write-cost.c
 *   /tmp/page-write-cost /tmp/page-write-cost.dat
 *
 * The file is in the page cache throughout (written, then read through a map), so this
 * is the system call's and the page cache's cost, not the disk's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { PAGE = 4096, PAGES = 11000, PER_TXN = 700, TXNS = 200, ROUNDS = 5, RUN = 16 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ns per page of one way (0 pwrite, 1 pwritev of RUN pages, 2 the writable map). */
static double measure(int way, int fd, char *map, char *bufs) {
    struct iovec iov[RUN];
    for (int i = 0; i < RUN; i++) {
        iov[i].iov_base = bufs + (size_t)i * PAGE;
        iov[i].iov_len = PAGE;
    }
    double t0 = now();
    for (int txn = 0; txn < TXNS; txn++) {
        for (int k = 0; k < PER_TXN; k += way == 1 ? RUN : 1) {
            size_t page = (size_t)(rand() % (PAGES - RUN));
            bufs[0] = (char)txn;
            if (way == 0) {
                if (pwrite(fd, bufs, PAGE, (off_t)(page * PAGE)) != PAGE) { perror("pwrite"); exit(1); }
            } else if (way == 1) {
                if (pwritev(fd, iov, RUN, (off_t)(page * PAGE)) != RUN * PAGE) { perror("pwritev"); exit(1); }
            } else {
                memcpy(map + page * PAGE, bufs, PAGE);
            }
        }
    }
    return (now() - t0) * 1e9 / ((double)TXNS * PER_TXN);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    char *bufs = aligned_alloc(PAGE, (size_t)RUN * PAGE);
    memset(bufs, 7, (size_t)RUN * PAGE);
    for (size_t i = 0; i < PAGES; i++)
        if (pwrite(fd, bufs, PAGE, (off_t)(i * PAGE)) != PAGE) { perror("pwrite"); return 1; }
    char *map = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) { perror("mmap"); return 1; }
    volatile long sum = 0;
    for (size_t i = 0; i < PAGES; i++) sum += map[i * PAGE];
    static const char *names[] = {"pwrite, one page", "pwritev, 16 pages", "copy into a writable map"};
    double ns[3][ROUNDS];
    srand(1);
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < 3; i++) {
            int way = (i + r) % 3;
            ns[way][r] = measure(way, fd, map, bufs);
        }
    printf("| page write | ns per page (median of %d) |\n|---|---:|\n", ROUNDS);
    for (int way = 0; way < 3; way++) {
        qsort(ns[way], ROUNDS, sizeof(double), cmp);
        printf("| %s | %.0f |\n", names[way], ns[way][ROUNDS / 2]);
    }
    munmap(map, (size_t)PAGES * PAGE);
    close(fd);
    unlink(argv[1]);
    return 0;
}
