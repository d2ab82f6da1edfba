/* Barrier latency, as osu_barrier measures it, with the ranks' minimum,
 * maximum and average by MPI_Reduce of MPI_DOUBLE. */
#include "bench.h"

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank, nranks;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int n = scaled(10000), skip = n / 10;
    double t0 = 0;
    for (int i = 0; i < n + skip; i++) {
        if (i == skip) t0 = MPI_Wtime();
        MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    double t = (MPI_Wtime() - t0) * 1e6 / n, lo, hi, sum;
    MPI(MPI_Reduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
    MPI(MPI_Reduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI(MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        printf("# rmx-mpi barrier latency test\n# Avg Latency(us)   Min Latency(us)   Max Latency(us)\n%18.2f%18.2f%18.2f\n",
               sum / nranks, lo, hi);
    MPI(MPI_Finalize());
    return 0;
}
