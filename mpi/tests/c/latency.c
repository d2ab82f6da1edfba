/* Ping-pong latency between ranks 0 and 1, as osu_latency measures it:
 * MPI_Send and MPI_Recv of MPI_CHAR, half the round trip, in µs. Every
 * message's bytes are checked once after the timed loop. */
#include "bench.h"

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    int rank, nranks;
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    int top = max_size(argc, argv, MAX_SIZE);
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK(nranks >= 2, "run with 2 ranks");
    char *s = malloc(MAX_SIZE), *r = malloc(MAX_SIZE);
    char name[MPI_MAX_OBJECT_NAME];
    int len, tsize;
    MPI(MPI_Type_get_name(MPI_CHAR, name, &len));
    MPI(MPI_Type_size(MPI_CHAR, &tsize));
    CHECK(tsize == 1 && strcmp(name, "MPI_CHAR") == 0, "MPI_CHAR is %s of %d", name, tsize);
    if (rank == 0) printf("# rmx-mpi latency test\n# Size          Latency (us)\n");
    for (int size = 0; size <= top; size = size ? size * 2 : 1) {
        int n = scaled(iters(size, 10000, 1000)), skip = n / 10;
        double t0 = 0;
        MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < n + skip; i++) {
            if (i == skip) t0 = MPI_Wtime();
            if (rank == 0) {
                MPI(MPI_Send(s, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD));
                MPI(MPI_Recv(r, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else if (rank == 1) {
                MPI(MPI_Recv(r, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                MPI(MPI_Send(s, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD));
            }
        }
        double t = MPI_Wtime() - t0;
        /* One checked exchange: the bytes and the status. */
        if (rank < 2) {
            MPI_Status st;
            int peer = 1 - rank, count;
            fill(s, rank, size, 1);
            MPI(MPI_Sendrecv(s, size, MPI_CHAR, peer, 2, r, size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &st));
            MPI(MPI_Get_count(&st, MPI_CHAR, &count));
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 2 && count == size, "status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, count);
            CHECK(same(r, peer, size, 1), "bytes of %d", size);
        }
        if (rank == 0) printf("%-10d%18.2f\n", size, t * 1e6 / (2.0 * n));
        fflush(stdout);
    }
    free(s);
    free(r);
    MPI(MPI_Finalize());
    return 0;
}
