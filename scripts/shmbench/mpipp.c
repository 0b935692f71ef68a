/* mpipp.c: Open MPI's shared-memory transport as the peer figure of
 * scripts/shm-bench.sh: ranks 0 and 1 ping-pong 8 bytes (mean round
 * trip, microseconds) and stream 65000-byte messages from 0 to 1 (MB/s),
 * the sizes testam measures.
 *
 *   mpirun -np 2 --mca btl vader,self mpipp ITERS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define BIG 65000

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	char *buf = calloc(1, BIG);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (long i = 0; i < iters; i++) {
		if (rank == 0) {
			MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
		}
	}
	double rtt = MPI_Wtime() - t0;
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (long i = 0; i < iters; i++) {
		if (rank == 0)
			MPI_Send(buf, BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
		else if (rank == 1)
			MPI_Recv(buf, BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	if (rank == 0) /* the last message has arrived when 1 answers */
		MPI_Recv(buf, 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	else if (rank == 1)
		MPI_Send(buf, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
	double stream = MPI_Wtime() - t0;
	if (rank == 0) {
		printf("mpi_rtt_us %.3f\n", rtt / iters * 1e6);
		printf("mpi_stream_MBps %.1f\n", (double)iters * BIG / stream / 1e6);
	}
	MPI_Finalize();
	return 0;
}
