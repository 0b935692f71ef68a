/* floor.c: the shared-memory floor of a round trip between two processes
 * of one host: a parent and a child ping-pong one cache line of an
 * anonymous shared mapping, spinning, and copy 64 KiB through a shared
 * buffer (one copy in, one out, as a queue does). Prints the mean round
 * trip in microseconds and the copy rate in MB/s (scripts/shm-bench.sh).
 *
 *   floor ITERS
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG 65536

struct shared {
	_Alignas(64) atomic_long ping;
	_Alignas(64) atomic_long pong;
	_Alignas(64) char buf[BIG];
};

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	long iters = argc > 1 ? atol(argv[1]) : 100000;
	if (iters < 10) {
		fprintf(stderr, "floor: ITERS %ld: accepted: 10 or more\n", iters);
		return 2;
	}
	struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED) {
		perror("floor: mmap");
		return 1;
	}
	char *src = malloc(BIG), *dst = malloc(BIG);
	memset(src, 7, BIG);
	pid_t pid = fork();
	if (pid < 0) {
		perror("floor: fork");
		return 1;
	}
	if (pid == 0) { /* echo ping as pong; then drain the copies */
		for (long i = 1; i <= iters; i++) {
			while (atomic_load(&s->ping) != i)
				;
			atomic_store(&s->pong, i);
		}
		for (long i = 1; i <= iters; i++) {
			while (atomic_load(&s->ping) != iters + i)
				;
			memcpy(dst, s->buf, BIG);
			atomic_store(&s->pong, iters + i);
		}
		_exit(0);
	}
	double t0 = now();
	for (long i = 1; i <= iters; i++) {
		atomic_store(&s->ping, i);
		while (atomic_load(&s->pong) != i)
			;
	}
	double rtt = now() - t0;
	t0 = now();
	for (long i = 1; i <= iters; i++) {
		memcpy(s->buf, src, BIG);
		atomic_store(&s->ping, iters + i);
		while (atomic_load(&s->pong) != iters + i)
			;
	}
	double copy = now() - t0;
	waitpid(pid, NULL, 0);
	printf("floor_rtt_us %.3f\n", rtt / iters * 1e6);
	printf("floor_copy_MBps %.1f\n", (double)iters * BIG / copy / 1e6);
	return 0;
}
