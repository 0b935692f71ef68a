/* coll: MPI_Barrier, an 8-byte MPI_Allgather, an 8-byte MPI_Bcast from
 * rank 0, a one-element MPI_Allreduce (a sum of 64-bit integers), an
 * 8-byte MPI_Gather to rank 0 and an MPI_Alltoall of 8-byte blocks, timed
 * per operation, as
 * the reference a udpconduit job's collectives are compared with on the
 * same machine (scripts/scale.sh). Usage: mpirun -np N coll ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 1000;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long long mine = rank, *all = malloc(sizeof(long long) * size);
	for (int i = 0; i < iters / 10 + 1; i++) /* warm up */
		MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Barrier(MPI_COMM_WORLD);
	double t1 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Allgather(&mine, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, MPI_COMM_WORLD);
	double t2 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Bcast(&mine, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	double t3 = MPI_Wtime();
	long long sum;
	for (int i = 0; i < iters; i++)
		MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	double t4 = MPI_Wtime();
	long long *blocks = malloc(sizeof(long long) * size), *got = malloc(sizeof(long long) * size);
	for (int r = 0; r < size; r++)
		blocks[r] = (long long)rank << 8 | r;
	for (int i = 0; i < iters; i++)
		MPI_Gather(&mine, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	double t5 = MPI_Wtime();
	for (int i = 0; i < iters; i++)
		MPI_Alltoall(blocks, 1, MPI_LONG_LONG, got, 1, MPI_LONG_LONG, MPI_COMM_WORLD);
	double t6 = MPI_Wtime();
	if (rank == 0) {
		printf("mpi_barrier       0 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t1 - t0) / iters * 1e6, size);
		printf("mpi_allgather     8 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t2 - t1) / iters * 1e6, size);
		printf("mpi_broadcast     8 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t3 - t2) / iters * 1e6, size);
		printf("mpi_allreduce     8 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t4 - t3) / iters * 1e6, size);
		printf("mpi_gather        8 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t5 - t4) / iters * 1e6, size);
		printf("mpi_alltoall      8 B %6d iters %12.2f µs/op  %d ranks\n", iters, (t6 - t5) / iters * 1e6, size);
	}
	free(blocks);
	free(got);
	free(all);
	MPI_Finalize();
	return 0;
}
