/* Multi-pair bandwidth and message rate, as osu_mbw_mr measures them:
 * the first half of the ranks each send windows of 64 messages to a
 * partner in the second half; the pairs meet in a communicator from
 * MPI_Comm_split (one per size, never freed, as OSU's program does), and
 * the per-pair rates are summed with MPI_Reduce on MPI_DOUBLE. */
#include "bench.h"

#define WINDOW 64

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank, nranks;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int top = max_size(argc, argv, 1 << 16);
    CHECK(nranks % 2 == 0, "run with an even number of ranks");
    int pairs = nranks / 2, sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    char *buf = malloc((size_t)(1 << 16) * WINDOW);
    MPI_Request req[WINDOW];
    if (rank == 0) printf("# rmx-mpi multiple bandwidth / message rate test (%d pairs)\n# Size                  MB/s        Messages/s\n", pairs);
    for (int size = 1; size <= top; size *= 2) {
        MPI_Comm pair;
        MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &pair));
        int n = scaled(iters(size, 100, 20)), skip = n / 10;
        double t0 = 0;
        MPI(MPI_Barrier(pair));
        for (int i = 0; i < n + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (sender) {
                for (int w = 0; w < WINDOW; w++)
                    MPI(MPI_Isend(buf + (size_t)w * size, size, MPI_CHAR, peer, 100, pair, &req[w]));
                MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
                MPI(MPI_Recv(buf, 4, MPI_CHAR, peer, 101, pair, MPI_STATUS_IGNORE));
            } else {
                for (int w = 0; w < WINDOW; w++)
                    MPI(MPI_Irecv(buf + (size_t)w * size, size, MPI_CHAR, peer, 100, pair, &req[w]));
                MPI(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
                MPI(MPI_Send(buf, 4, MPI_CHAR, peer, 101, pair));
            }
        }
        double t = MPI_Wtime() - t0;
        double rate = sender ? (double)n * WINDOW / t : 0, sum = 0;
        MPI(MPI_Reduce(&rate, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
        if (rank == 0) printf("%-10d%18.2f%18.2f\n", size, sum * size / 1e6, sum);
        fflush(stdout);
    }
    free(buf);
    MPI(MPI_Finalize());
    return 0;
}
