/* Allreduce latency, as osu_allreduce measures it: MPI_Allreduce of
 * MPI_CHAR with MPI_SUM over every rank, then the minimum, maximum and
 * average of the ranks' times by MPI_Reduce of MPI_DOUBLE. Each size's
 * last result is checked against the sum it must be. */
#include "bench.h"

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank, nranks;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int max = max_size(argc, argv, 1 << 16);
    char *s = malloc(max), *r = malloc(max);
    if (rank == 0) printf("# rmx-mpi allreduce latency test\n# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)\n");
    for (int size = 1; size <= max; size *= 2) {
        int n = scaled(iters(size, 1000, 100)), skip = n / 10;
        for (int i = 0; i < size; i++) s[i] = (char)(rank + i);
        double t0 = 0;
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < n + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            MPI(MPI_Allreduce(s, r, size, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD));
        }
        double t = (MPI_Wtime() - t0) * 1e6 / n, lo, hi, sum;
        for (int i = 0; i < size; i++) {
            int want = 0;
            for (int k = 0; k < nranks; k++) want += k + i;
            CHECK(r[i] == (char)want, "element %d of %d: %d, not %d", i, size, r[i], (char)want);
        }
        MPI(MPI_Reduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
        MPI(MPI_Reduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        MPI(MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
        if (rank == 0) printf("%-10d%18.2f%18.2f%18.2f\n", size, sum / nranks, lo, hi);
        fflush(stdout);
    }
    free(s);
    free(r);
    MPI(MPI_Finalize());
    return 0;
}
