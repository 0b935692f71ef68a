/* hello.c: the MPI peer of cmd/hello for scripts/direct-bench.sh: every
 * rank prints "hello from rank R of N on HOST", waits in a barrier and
 * exits 0. Built with MPICH's mpicc (make deps installs libmpich-dev), it
 * starts under srun --mpi=pmi2 and mpiexec.hydra as our direct launch does. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int rank, size;
  char host[256];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gethostname(host, sizeof host);
  printf("hello from rank %d of %d on %s\n", rank, size, host);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
