/* fao: MPI_Fetch_and_op throughput, the reference for udpconduit's remote
 * atomics (scripts/atomic-bench.sh): ranks 1..N-1 each fetch-and-add 1 to
 * one 64-bit word of rank 0's window ITERS times, each operation completed
 * (MPI_Win_flush) before the next, then ITERS times to a random word of a
 * random other rank's window of 1024 words. Rank 0 prints the operations
 * per second of each phase, and checks the counter.
 * Usage: mpirun -np N fao ITERS */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WORDS 1024

int main(int argc, char **argv) {
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 10000;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	uint64_t *base, one = 1, old;
	MPI_Win win;
	MPI_Win_allocate(WORDS * sizeof(uint64_t), sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i < WORDS; i++)
		base[i] = 0;
	MPI_Win_lock_all(0, win);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	if (rank > 0)
		for (int i = 0; i < iters; i++) {
			MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 0, 0, MPI_SUM, win);
			MPI_Win_flush(0, win);
		}
	MPI_Barrier(MPI_COMM_WORLD);
	double t1 = MPI_Wtime();
	srand(rank + 1);
	if (rank > 0 || size == 1)
		for (int i = 0; i < iters; i++) {
			int to = size == 1 ? 0 : (rank + 1 + rand() % (size - 1)) % size;
			MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, to, 1 + rand() % (WORDS - 1), MPI_SUM, win);
			MPI_Win_flush(to, win);
		}
	MPI_Barrier(MPI_COMM_WORLD);
	double t2 = MPI_Wtime();
	MPI_Win_unlock_all(win);
	if (rank == 0) {
		long long ops = (long long)iters * (size > 1 ? size - 1 : 1);
		if (size > 1 && base[0] != (uint64_t)ops)
			printf("mpi_fao: the counter holds %llu, want %lld\n", (unsigned long long)base[0], ops);
		printf("mpi_fao_one    %d ranks %8lld ops %12.0f ops/s\n", size, ops, ops / (t1 - t0));
		printf("mpi_fao_random %d ranks %8lld ops %12.0f ops/s\n", size, ops, ops / (t2 - t1));
	}
	MPI_Win_free(&win);
	MPI_Finalize();
	return 0;
}
