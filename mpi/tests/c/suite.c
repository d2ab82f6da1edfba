/* The subset's behaviour, checked from C through the standard ABI: run
 * with 2 to 4 ranks on any libmpi_abi.so.1. It prints what it computed
 * (rank 0, deterministic), so that the same binary's output on two
 * libraries can be compared line by line. */
#include <stdint.h>

#include "bench.h"

static int rank, nranks, checks;

#define OK(cond, ...)            \
    do {                         \
        CHECK(cond, __VA_ARGS__); \
        checks++;                \
    } while (0)

/* Rank 0 prints a result line every library must give alike. */
#define SAY(...)                  \
    do {                          \
        if (rank == 0) {          \
            printf(__VA_ARGS__);  \
            printf("\n");         \
            fflush(stdout);       \
        }                         \
    } while (0)

static int is_rmx(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI(MPI_Get_library_version(v, &len));
    return strstr(v, "rmx") != NULL;
}

static int class_of(int code) {
    int c;
    MPI(MPI_Error_class(code, &c));
    return c;
}

static void environment(void) {
    int major, minor, flag, provided;
    MPI(MPI_Abi_get_version(&major, &minor));
    OK(major == 1 && minor == 0, "ABI %d.%d", major, minor);
    MPI(MPI_Get_version(&major, &minor));
    OK(major == 5 && minor == 0, "MPI %d.%d", major, minor);
    MPI(MPI_Initialized(&flag));
    OK(flag, "initialised");
    MPI(MPI_Query_thread(&provided));
    OK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "thread level %d", provided);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI(MPI_Get_processor_name(host, &len));
    OK(len > 0 && (int)strlen(host) == len, "host name");
    int *ub;
    MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    OK(flag && *ub >= 32767, "MPI_TAG_UB");
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    OK(t1 >= t0 && MPI_Wtick() > 0, "clock");
    struct { MPI_Datatype t; int size; const char *name; } types[] = {
        {MPI_CHAR, 1, "MPI_CHAR"}, {MPI_INT, 4, "MPI_INT"}, {MPI_DOUBLE, 8, "MPI_DOUBLE"},
        {MPI_LONG_LONG, 8, "MPI_LONG_LONG"}, {MPI_UINT16_T, 2, "MPI_UINT16_T"}, {MPI_BYTE, 1, "MPI_BYTE"},
        {MPI_FLOAT, 4, "MPI_FLOAT"}, {MPI_C_DOUBLE_COMPLEX, 16, "MPI_C_DOUBLE_COMPLEX"},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        int size;
        char name[MPI_MAX_OBJECT_NAME];
        MPI(MPI_Type_size(types[i].t, &size));
        MPI(MPI_Type_get_name(types[i].t, name, &len));
        OK(size == types[i].size, "%s is %d bytes", types[i].name, size);
        /* MPICH names MPI_LONG_LONG "MPI_LONG_LONG_INT": a prefix is enough. */
        OK(strncmp(name, types[i].name, strlen(types[i].name)) == 0, "%s named %s", types[i].name, name);
    }
    SAY("environment: ABI 1.0, MPI 5.0, %d types", (int)(sizeof types / sizeof *types));
}

static void point_to_point(void) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    /* A ring of non-blocking messages, several sizes at once. */
    enum { N = 4 };
    static char out[N][70000], in[N][70000];
    MPI_Request req[2 * N];
    MPI_Status st[2 * N];
    int sizes[N] = {0, 8, 4096, 70000};
    for (int k = 0; k < N; k++) {
        fill(out[k], rank, sizes[k], k);
        MPI(MPI_Irecv(in[k], sizes[k], MPI_CHAR, prev, 10 + k, MPI_COMM_WORLD, &req[k]));
    }
    for (int k = 0; k < N; k++) MPI(MPI_Isend(out[k], sizes[k], MPI_CHAR, next, 10 + k, MPI_COMM_WORLD, &req[N + k]));
    MPI(MPI_Waitall(2 * N, req, st));
    for (int k = 0; k < N; k++) {
        int count;
        MPI(MPI_Get_count(&st[k], MPI_CHAR, &count));
        OK(req[k] == MPI_REQUEST_NULL, "an ended request is null");
        OK(st[k].MPI_SOURCE == prev && st[k].MPI_TAG == 10 + k && count == sizes[k], "ring status %d", k);
        OK(same(in[k], prev, sizes[k], k), "ring bytes %d", k);
    }

    /* Any source, any tag; probe then receive what it found. */
    int v = 1000 + rank, got = -1;
    MPI_Status s;
    MPI(MPI_Send(&v, 1, MPI_INT, next, 20 + rank, MPI_COMM_WORLD));
    MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &s));
    int count;
    MPI(MPI_Get_count(&s, MPI_INT, &count));
    OK(s.MPI_SOURCE == prev && s.MPI_TAG == 20 + prev && count == 1, "probe");
    MPI(MPI_Get_count(&s, MPI_DOUBLE, &count));
    OK(count == MPI_UNDEFINED, "4 bytes are no whole double");
    MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &s));
    OK(got == 1000 + prev && s.MPI_SOURCE == prev, "any source");
    int flag = 1;
    MPI(MPI_Iprobe(prev, 20 + prev, MPI_COMM_WORLD, &flag, &s));
    OK(!flag, "the message probed was taken");

    /* MPI_PROC_NULL: done at once, status says so. */
    MPI(MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &s));
    MPI(MPI_Get_count(&s, MPI_INT, &count));
    OK(s.MPI_SOURCE == MPI_PROC_NULL && s.MPI_TAG == MPI_ANY_TAG && count == 0, "proc null");
    MPI(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

    /* Waitany, Test, Testall. */
    int a = rank, b = -1;
    MPI(MPI_Irecv(&b, 1, MPI_INT, prev, 30, MPI_COMM_WORLD, &req[0]));
    req[1] = MPI_REQUEST_NULL;
    MPI(MPI_Isend(&a, 1, MPI_INT, next, 30, MPI_COMM_WORLD, &req[2]));
    int idx, done = 0, ended = 0;
    while (ended < 2) {
        MPI(MPI_Waitany(3, req, &idx, &s));
        OK(idx == 0 || idx == 2, "waitany index %d", idx);
        ended++;
    }
    MPI(MPI_Waitany(3, req, &idx, &s));
    OK(idx == MPI_UNDEFINED, "no live request left");
    OK(b == prev, "waitany data");
    MPI(MPI_Irecv(&b, 1, MPI_INT, prev, 31, MPI_COMM_WORLD, &req[0]));
    MPI(MPI_Isend(&a, 1, MPI_INT, next, 31, MPI_COMM_WORLD, &req[1]));
    while (!done) MPI(MPI_Testall(2, req, &done, MPI_STATUSES_IGNORE));
    OK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL && b == prev, "testall");
    MPI(MPI_Irecv(&b, 1, MPI_INT, prev, 32, MPI_COMM_WORLD, &req[0]));
    MPI(MPI_Send(&a, 1, MPI_INT, next, 32, MPI_COMM_WORLD));
    for (done = 0; !done;) MPI(MPI_Test(&req[0], &done, &s));
    OK(s.MPI_TAG == 32, "test");

    /* A receive nobody sends to, cancelled. */
    MPI(MPI_Irecv(&b, 1, MPI_INT, prev, 99, MPI_COMM_WORLD, &req[0]));
    MPI(MPI_Cancel(&req[0]));
    MPI(MPI_Wait(&req[0], &s));
    MPI(MPI_Test_cancelled(&s, &flag));
    OK(flag, "cancelled");

    /* A send given up on still arrives. */
    MPI(MPI_Isend(&a, 1, MPI_INT, next, 33, MPI_COMM_WORLD, &req[0]));
    MPI(MPI_Request_free(&req[0]));
    OK(req[0] == MPI_REQUEST_NULL, "freed");
    MPI(MPI_Recv(&b, 1, MPI_INT, prev, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(b == prev, "freed send arrived");

    /* Sendrecv, and to oneself on MPI_COMM_SELF. */
    MPI(MPI_Sendrecv(&a, 1, MPI_INT, next, 34, &b, 1, MPI_INT, prev, 34, MPI_COMM_WORLD, &s));
    OK(b == prev, "sendrecv");
    int me;
    MPI(MPI_Comm_rank(MPI_COMM_SELF, &me));
    MPI(MPI_Comm_size(MPI_COMM_SELF, &count));
    OK(me == 0 && count == 1, "self");
    MPI(MPI_Sendrecv(&a, 1, MPI_INT, 0, 35, &b, 1, MPI_INT, 0, 35, MPI_COMM_SELF, &s));
    OK(b == rank && s.MPI_SOURCE == 0, "to oneself");
    SAY("point-to-point: ring, probe, proc null, waitany, testall, test, cancel, free, sendrecv, self");
}

static void communicators(void) {
    MPI_Comm dup, half;
    int r, n, cmp;
    MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
    OK(cmp == MPI_CONGRUENT, "a copy is congruent");
    MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp));
    OK(cmp == MPI_IDENT, "ident");
    /* Messages of one communicator never match another's receives. */
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, x = 1, y = 2, gx = 0, gy = 0;
    MPI_Request q[2];
    MPI(MPI_Isend(&x, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &q[0]));
    MPI(MPI_Isend(&y, 1, MPI_INT, next, 5, dup, &q[1]));
    MPI(MPI_Recv(&gy, 1, MPI_INT, prev, 5, dup, MPI_STATUS_IGNORE));
    MPI(MPI_Recv(&gx, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    OK(gx == 1 && gy == 2, "contexts apart");
    /* Even and odd ranks, in reverse order of rank. */
    MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    MPI(MPI_Comm_rank(half, &r));
    MPI(MPI_Comm_size(half, &n));
    int want_n = (nranks + 1 - rank % 2) / 2;
    OK(n == want_n, "half of %d", n);
    OK(r == n - 1 - rank / 2, "reversed rank %d", r);
    MPI(MPI_Comm_compare(MPI_COMM_WORLD, half, &cmp));
    OK(cmp == MPI_UNEQUAL || nranks == 1, "unequal");
    int sum = 0;
    MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int want = 0;
    for (int k = rank % 2; k < nranks; k += 2) want += k;
    OK(sum == want, "allreduce in a half: %d", sum);
    int root_rank = rank;
    MPI(MPI_Bcast(&root_rank, 1, MPI_INT, 0, half));
    int top = nranks - 1 - ((nranks - 1 - rank % 2) % 2);
    OK(root_rank == top, "bcast from the half's rank 0 (%d)", root_rank);
    MPI_Comm none;
    MPI(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none));
    OK((rank == 0) == (none == MPI_COMM_NULL), "undefined color");
    if (none != MPI_COMM_NULL) MPI(MPI_Comm_free(&none));
    MPI(MPI_Comm_free(&half));
    MPI(MPI_Comm_free(&dup));
    OK(half == MPI_COMM_NULL && dup == MPI_COMM_NULL, "freed");
    SAY("communicators: dup, compare, contexts, split, free");
}

static void collectives_on(MPI_Comm comm, const char *what) {
    int r, n;
    MPI(MPI_Comm_rank(comm, &r));
    MPI(MPI_Comm_size(comm, &n));
    MPI(MPI_Barrier(comm));
    for (int root = 0; root < n; root++) {
        double d[3] = {0};
        if (r == root) d[0] = root + 0.5, d[1] = -root, d[2] = 1e300;
        MPI(MPI_Bcast(d, 3, MPI_DOUBLE, root, comm));
        OK(d[0] == root + 0.5 && d[1] == -root && d[2] == 1e300, "bcast from %d", root);
        long long v[2] = {r + 1, (long long)r << 40}, s[2] = {0, 0};
        MPI(MPI_Reduce(v, s, 2, MPI_LONG_LONG, MPI_SUM, root, comm));
        if (r == root) OK(s[0] == (long long)n * (n + 1) / 2 && s[1] == ((long long)n * (n - 1) / 2) << 40, "reduce to %d", root);
        double m = r * 1.25, mx = 0;
        MPI(MPI_Reduce(&m, &mx, 1, MPI_DOUBLE, MPI_MAX, root, comm));
        if (r == root) OK(mx == (n - 1) * 1.25, "double max");
        int gathered[64], mine = 100 + r, back = -1;
        MPI(MPI_Gather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, root, comm));
        if (r == root)
            for (int k = 0; k < n; k++) OK(gathered[k] == 100 + k, "gather %d", k);
        for (int k = 0; k < n; k++) gathered[k] = 200 + k;
        MPI(MPI_Scatter(gathered, 1, MPI_INT, &back, 1, MPI_INT, root, comm));
        OK(back == 200 + r, "scatter");
    }
    char c[5] = {100, 100, 100, -100, 1}, cs[5];
    MPI(MPI_Allreduce(c, cs, 5, MPI_CHAR, MPI_SUM, comm));
    for (int k = 0; k < 5; k++) OK(cs[k] == (char)(c[k] * n), "char sum wraps");
    struct { double v; int i; } dl = {(double)(r % 2), r}, dg;
    MPI(MPI_Allreduce(&dl, &dg, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
    OK(dg.v == (n > 1 ? 1.0 : 0.0) && dg.i == (n > 1 ? 1 : 0), "maxloc: %g at %d", dg.v, dg.i);
    int il[2] = {n - r, r}, ig[2];
    MPI(MPI_Allreduce(il, ig, 1, MPI_2INT, MPI_MINLOC, comm));
    OK(ig[0] == 1 && ig[1] == n - 1, "minloc: %d at %d", ig[0], ig[1]);
    int in_place[2] = {r, 1};
    MPI(MPI_Allreduce(MPI_IN_PLACE, in_place, 2, MPI_INT, MPI_MIN, comm));
    OK(in_place[0] == 0 && in_place[1] == 1, "in place min");
    int all[64];
    all[r] = r * r;
    MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT, comm));
    for (int k = 0; k < n; k++) OK(all[k] == k * k, "allgather in place %d", k);
    int blocks[64], mine[64];
    for (int k = 0; k < n; k++) mine[k] = r * 100 + k;
    MPI(MPI_Alltoall(mine, 1, MPI_INT, blocks, 1, MPI_INT, comm));
    for (int k = 0; k < n; k++) OK(blocks[k] == k * 100 + r, "alltoall %d", k);
    int rs = -1;
    for (int k = 0; k < n; k++) mine[k] = k + r;
    MPI(MPI_Reduce_scatter_block(mine, &rs, 1, MPI_INT, MPI_SUM, comm));
    OK(rs == r * n + n * (n - 1) / 2, "reduce scatter block");
    MPI_Request q;
    MPI_Status st;
    MPI(MPI_Ibarrier(comm, &q));
    MPI(MPI_Wait(&q, &st));
    unsigned u = 1u << r, bits = 0;
    int done = 0;
    MPI(MPI_Iallreduce(&u, &bits, 1, MPI_UNSIGNED, MPI_BOR, comm, &q));
    while (!done) MPI(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
    OK(bits == (1u << n) - 1, "iallreduce bor");
    SAY("collectives on %s: barrier, bcast, reduce, gather, scatter, allreduce, maxloc, minloc, allgather, alltoall, reduce_scatter_block, ibarrier, iallreduce", what);
}

static void windows(void) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    int *base;
    MPI_Win win;
    MPI(MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int k = 0; k < 4; k++) base[k] = 0;
    MPI(MPI_Win_fence(0, win));
    int v = 10 + rank, one = 1, got = -1;
    MPI(MPI_Put(&v, 1, MPI_INT, next, 1, 1, MPI_INT, win));
    MPI(MPI_Accumulate(&one, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
    MPI(MPI_Win_fence(0, win));
    OK(base[1] == 10 + prev, "put landed: %d", base[1]);
    if (rank == 0) OK(base[2] == nranks, "accumulate: %d", base[2]);
    base[3] = 50 + rank; /* a local store, read by another after the fence */
    MPI(MPI_Win_fence(0, win));
    MPI(MPI_Get(&got, 1, MPI_INT, prev, 3, 1, MPI_INT, win));
    MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    OK(got == 50 + prev, "get: %d", got);
    MPI(MPI_Win_free(&win));
    OK(win == MPI_WIN_NULL, "freed");

    /* The caller's memory. */
    double mem[2] = {rank, 0}, d = 0.25, dg = -1;
    MPI(MPI_Win_create(mem, sizeof mem, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI(MPI_Win_fence(0, win));
    MPI(MPI_Accumulate(&d, 1, MPI_DOUBLE, next, 1, 1, MPI_DOUBLE, MPI_SUM, win));
    MPI(MPI_Get(&dg, 1, MPI_DOUBLE, prev, 0, 1, MPI_DOUBLE, win));
    MPI(MPI_Win_fence(0, win));
    OK(mem[1] == 0.25 && dg == prev, "window over caller memory: %g %g", mem[1], dg);
    mem[0] = 1000 + rank;
    MPI(MPI_Win_fence(0, win));
    MPI(MPI_Get(&dg, 1, MPI_DOUBLE, next, 0, 1, MPI_DOUBLE, win));
    MPI(MPI_Win_fence(0, win));
    OK(dg == 1000 + next, "a local store reaches a later get: %g", dg);
    MPI(MPI_Win_free(&win));
    SAY("windows: allocate and create, put, get, accumulate (int and double), fences");
}

static void errors(void) {
    MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int v = 0, code;
    code = MPI_Send(&v, 1, MPI_INT, nranks + 5, 0, MPI_COMM_WORLD);
    OK(code != MPI_SUCCESS && class_of(code) == MPI_ERR_RANK, "bad rank gives MPI_ERR_RANK");
    code = MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD);
    OK(code != MPI_SUCCESS && class_of(code) == MPI_ERR_TAG, "bad tag gives MPI_ERR_TAG");
    code = MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    OK(code != MPI_SUCCESS && class_of(code) == MPI_ERR_COUNT, "bad count gives MPI_ERR_COUNT");
    code = MPI_Barrier(MPI_COMM_NULL);
    OK(code != MPI_SUCCESS && class_of(code) == MPI_ERR_COMM, "null communicator gives MPI_ERR_COMM");
    /* A message longer than its receive buffer. */
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, two[2] = {1, 2};
    MPI_Request q;
    MPI(MPI_Isend(two, 2, MPI_INT, next, 40, MPI_COMM_WORLD, &q));
    MPI_Status st;
    code = MPI_Recv(&v, 1, MPI_INT, prev, 40, MPI_COMM_WORLD, &st);
    OK(code != MPI_SUCCESS && class_of(code) == MPI_ERR_TRUNCATE, "truncation gives MPI_ERR_TRUNCATE");
    MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (is_rmx()) {
        /* A function outside rmx's subset says so, by name. */
        MPI_Datatype t;
        code = MPI_Type_contiguous(2, MPI_INT, &t);
        OK(code == MPI_ERR_UNSUPPORTED_OPERATION, "unsupported: %d", code);
        char s[MPI_MAX_ERROR_STRING];
        int len;
        MPI(MPI_Error_string(code, s, &len));
        OK(strstr(s, "MPI_Type_contiguous") != NULL, "the error names the function: %s", s);
        /* Handles rmx never gave are errors, not dereferences. */
        MPI_Request forged = (MPI_Request)(intptr_t)0x12345678, reqs[2];
        code = MPI_Wait(&forged, MPI_STATUS_IGNORE);
        OK(class_of(code) == MPI_ERR_REQUEST, "a forged request: %d", code);
        MPI(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &reqs[0]));
        reqs[1] = forged;
        code = MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        OK(class_of(code) == MPI_ERR_REQUEST && reqs[0] != MPI_REQUEST_NULL, "waitall checks every handle before waiting");
        MPI(MPI_Cancel(&reqs[0]));
        MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
        int r;
        code = MPI_Comm_rank((MPI_Comm)(intptr_t)0x7777, &r);
        OK(class_of(code) == MPI_ERR_COMM, "a forged communicator");
        code = MPI_Win_fence(0, (MPI_Win)(intptr_t)0x300000001);
        OK(class_of(code) == MPI_ERR_WIN, "a forged window");
        MPI_Comm world = MPI_COMM_WORLD;
        code = MPI_Comm_free(&world);
        OK(class_of(code) == MPI_ERR_COMM, "the world is not freed");
        code = MPI_Type_size(MPI_DATATYPE_NULL, &r);
        OK(class_of(code) == MPI_ERR_TYPE, "no datatype");
        code = MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD);
        OK(class_of(code) == MPI_ERR_OP, "MAXLOC is not offered");
        code = MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_REPLACE, MPI_COMM_WORLD);
        OK(class_of(code) == MPI_ERR_OP, "REPLACE is one-sided only");
        code = MPI_Recv(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        OK(class_of(code) == MPI_ERR_BUFFER, "a null buffer");
        code = MPI_Init(NULL, NULL);
        OK(class_of(code) == MPI_ERR_OTHER, "initialised twice");
    }
    MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    SAY("errors: rank, tag, count, communicator, truncation");
}

int main(int argc, char **argv) {
    MPI(MPI_Init(&argc, &argv));
    MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK(nranks <= 64, "at most 64 ranks");
    environment();
    point_to_point();
    communicators();
    collectives_on(MPI_COMM_WORLD, "the world");
    MPI_Comm half;
    MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    collectives_on(half, "a split");
    MPI(MPI_Comm_free(&half));
    windows();
    errors();
    int total = 0;
    MPI(MPI_Reduce(&checks, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    MPI(MPI_Finalize());
    int flag;
    MPI(MPI_Finalized(&flag));
    CHECK(flag, "finalised");
    if (rank == 0) printf("suite: %d ranks passed\n", nranks);
    fprintf(stderr, "rank %d: %d checks\n", rank, checks);
    (void)total;
    return 0;
}
