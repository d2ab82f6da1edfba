/* Bandwidth from rank 0 to rank 1, as osu_bw measures it: a window of
 * 64 MPI_Isend answered by 64 MPI_Irecv, MPI_Waitall on both, then a
 * 4-byte acknowledgement; MB/s (10^6 bytes). The last window's bytes
 * are checked. */
#include "bench.h"

#define WINDOW 64

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    int top = max_size(argc, argv, MAX_SIZE);
    char *buf = malloc((size_t)MAX_SIZE * WINDOW);
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW];
    if (rank == 0) printf("# rmx-mpi bandwidth test\n# Size      Bandwidth (MB/s)\n");
    for (int size = 1; size <= top; size *= 2) {
        int n = scaled(iters(size, 100, 20)), skip = n / 10;
        double t0 = 0;
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < n + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            int last = i == n + skip - 1;
            if (rank == 0) {
                for (int w = 0; w < WINDOW; w++) {
                    if (last) fill(buf + (size_t)w * size, w, size, i);
                    MPI(MPI_Isend(buf + (size_t)w * size, size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &req[w]));
                }
                MPI(MPI_Waitall(WINDOW, req, st));
                MPI(MPI_Recv(buf, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else if (rank == 1) {
                for (int w = 0; w < WINDOW; w++)
                    MPI(MPI_Irecv(buf + (size_t)w * size, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &req[w]));
                MPI(MPI_Waitall(WINDOW, req, st));
                if (last)
                    for (int w = 0; w < WINDOW; w++) {
                        int count;
                        MPI(MPI_Get_count(&st[w], MPI_CHAR, &count));
                        CHECK(count == size && same(buf + (size_t)w * size, w, size, i), "message %d of %d bytes", w, size);
                    }
                MPI(MPI_Send(buf, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD));
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) printf("%-10d%18.2f\n", size, (double)size * WINDOW * n / t / 1e6);
        fflush(stdout);
    }
    free(buf);
    MPI(MPI_Finalize());
    return 0;
}
