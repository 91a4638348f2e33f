/* The MPI program of the MPI cases, built with mpicc.openmpi or mpicc.mpich at the start of a
 * run and placed at /opt/train/mpi_check in every pod. Each rank all-reduces rank + 1 and prints
 * one E2E-RESULT line, which mpirun / mpiexec forward to the launcher's log. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0, length = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  char processor[MPI_MAX_PROCESSOR_NAME] = "";
  MPI_Get_processor_name(processor, &length);
  /* The pod's own hostname, which the harness compares with the expected host of this rank. */
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  int mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("E2E-RESULT {\"rank\": %d, \"world\": %d, \"host\": \"%s\", \"processor\": \"%s\", \"sum\": %d}\n",
         rank, world, host, processor, sum);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
