/* Put latency closed by fences, as osu_put_latency -s fence measures it:
 * a window from MPI_Win_allocate on MPI_COMM_WORLD per size, rank 0 puts
 * MPI_CHAR into rank 1's window and both fence (twice per iteration);
 * the time per put and fence, in µs. Rank 1 checks the last put's bytes. */
#include "bench.h"

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    int top = max_size(argc, argv, MAX_SIZE);
    char *s = malloc(MAX_SIZE);
    if (rank == 0) printf("# rmx-mpi put latency test (fence)\n# Size          Latency (us)\n");
    for (int size = 1; size <= top; size *= 2) {
        char *base;
        MPI_Win win;
        MPI(MPI_Win_allocate(MAX_SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        int n = scaled(iters(size, 1000, 100)), skip = n / 10;
        double t0 = 0;
        MPI(MPI_Win_fence(0, win));
        for (int i = 0; i < n + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (rank == 0) {
                if (i == n + skip - 1) fill(s, 0, size, i);
                MPI(MPI_Put(s, size, MPI_CHAR, 1, 0, size, MPI_CHAR, win));
            }
            MPI(MPI_Win_fence(0, win));
            MPI(MPI_Win_fence(0, win));
        }
        double t = MPI_Wtime() - t0;
        if (rank == 1) CHECK(same(base, 0, size, n + skip - 1), "the window holds the last put of %d bytes", size);
        if (rank == 0) printf("%-10d%18.2f\n", size, t * 1e6 / n);
        fflush(stdout);
        MPI(MPI_Win_free(&win));
    }
    free(s);
    MPI(MPI_Finalize());
    return 0;
}
