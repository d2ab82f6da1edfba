/* mpi.h for rmx's libmpi_abi.so.1: MPI 5.0's standard ABI (version 1.0).
 *
 * The values below are the ones the standard fixes, so a program built
 * against this header runs on any implementation of the ABI, and a
 * program built against another implementation's header (e.g. MPICH's
 * `mpicc_abi`) runs on rmx's library. Prototypes are given for the subset
 * rmx implements; the library also exports every other function of the
 * ABI, each returning MPI_ERR_UNSUPPORTED_OPERATION (see the README).
 *
 * Thread safety: rmx provides MPI_THREAD_SERIALIZED (calls from any
 * thread, one at a time). Ownership: a buffer handed to a non-blocking
 * call is the library's until the request ended (wait or test). */
#ifndef RMX_MPI_H
#define RMX_MPI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 5
#define MPI_SUBVERSION 0
#define MPI_ABI_VERSION 1
#define MPI_ABI_SUBVERSION 0

/* Integer types. */
typedef intptr_t MPI_Aint;
typedef int64_t MPI_Offset;
typedef int64_t MPI_Count;
typedef int MPI_Fint;

/* What a receive says of its message (32 bytes; the rest is rmx's). */
typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int MPI_internal[5];
} MPI_Status;

/* Handles: pointers to incomplete types; the predefined ones are small
 * constants, which no handle rmx makes can equal. */
typedef struct MPI_ABI_Comm *MPI_Comm;
typedef struct MPI_ABI_Datatype *MPI_Datatype;
typedef struct MPI_ABI_Errhandler *MPI_Errhandler;
typedef struct MPI_ABI_File *MPI_File;
typedef struct MPI_ABI_Group *MPI_Group;
typedef struct MPI_ABI_Info *MPI_Info;
typedef struct MPI_ABI_Message *MPI_Message;
typedef struct MPI_ABI_Op *MPI_Op;
typedef struct MPI_ABI_Request *MPI_Request;
typedef struct MPI_ABI_Session *MPI_Session;
typedef struct MPI_ABI_Win *MPI_Win;


/* Predefined handles. */
#define MPI_COMM_NULL                   ((MPI_Comm)0x00000100)
#define MPI_COMM_WORLD                  ((MPI_Comm)0x00000101)
#define MPI_COMM_SELF                   ((MPI_Comm)0x00000102)
#define MPI_GROUP_NULL                  ((MPI_Group)0x00000108)
#define MPI_GROUP_EMPTY                 ((MPI_Group)0x00000109)
#define MPI_WIN_NULL                    ((MPI_Win)0x00000110)
#define MPI_FILE_NULL                   ((MPI_File)0x00000118)
#define MPI_SESSION_NULL                ((MPI_Session)0x00000120)
#define MPI_MESSAGE_NULL                ((MPI_Message)0x00000128)
#define MPI_MESSAGE_NO_PROC             ((MPI_Message)0x00000129)
#define MPI_INFO_NULL                   ((MPI_Info)0x00000130)
#define MPI_INFO_ENV                    ((MPI_Info)0x00000131)
#define MPI_ERRHANDLER_NULL             ((MPI_Errhandler)0x00000140)
#define MPI_ERRORS_ARE_FATAL            ((MPI_Errhandler)0x00000141)
#define MPI_ERRORS_ABORT                ((MPI_Errhandler)0x00000142)
#define MPI_ERRORS_RETURN               ((MPI_Errhandler)0x00000143)
#define MPI_REQUEST_NULL                ((MPI_Request)0x00000180)

/* Reductions. */
#define MPI_OP_NULL                     ((MPI_Op)0x00000020)
#define MPI_SUM                         ((MPI_Op)0x00000021)
#define MPI_MIN                         ((MPI_Op)0x00000022)
#define MPI_MAX                         ((MPI_Op)0x00000023)
#define MPI_PROD                        ((MPI_Op)0x00000024)
#define MPI_BAND                        ((MPI_Op)0x00000028)
#define MPI_BOR                         ((MPI_Op)0x00000029)
#define MPI_BXOR                        ((MPI_Op)0x0000002a)
#define MPI_LAND                        ((MPI_Op)0x00000030)
#define MPI_LOR                         ((MPI_Op)0x00000031)
#define MPI_LXOR                        ((MPI_Op)0x00000032)
#define MPI_MINLOC                      ((MPI_Op)0x00000038)
#define MPI_MAXLOC                      ((MPI_Op)0x00000039)
#define MPI_REPLACE                     ((MPI_Op)0x0000003c)
#define MPI_NO_OP                       ((MPI_Op)0x0000003d)

/* Datatypes (all contiguous). */
#define MPI_DATATYPE_NULL               ((MPI_Datatype)0x00000200)
#define MPI_AINT                        ((MPI_Datatype)0x00000201)
#define MPI_COUNT                       ((MPI_Datatype)0x00000202)
#define MPI_OFFSET                      ((MPI_Datatype)0x00000203)
#define MPI_PACKED                      ((MPI_Datatype)0x00000207)
#define MPI_SHORT                       ((MPI_Datatype)0x00000208)
#define MPI_INT                         ((MPI_Datatype)0x00000209)
#define MPI_LONG                        ((MPI_Datatype)0x0000020a)
#define MPI_LONG_LONG                   ((MPI_Datatype)0x0000020b)
#define MPI_UNSIGNED_SHORT              ((MPI_Datatype)0x0000020c)
#define MPI_UNSIGNED                    ((MPI_Datatype)0x0000020d)
#define MPI_UNSIGNED_LONG               ((MPI_Datatype)0x0000020e)
#define MPI_UNSIGNED_LONG_LONG          ((MPI_Datatype)0x0000020f)
#define MPI_FLOAT                       ((MPI_Datatype)0x00000210)
#define MPI_C_FLOAT_COMPLEX             ((MPI_Datatype)0x00000212)
#define MPI_CXX_FLOAT_COMPLEX           ((MPI_Datatype)0x00000213)
#define MPI_DOUBLE                      ((MPI_Datatype)0x00000214)
#define MPI_C_DOUBLE_COMPLEX            ((MPI_Datatype)0x00000216)
#define MPI_CXX_DOUBLE_COMPLEX          ((MPI_Datatype)0x00000217)
#define MPI_LOGICAL                     ((MPI_Datatype)0x00000218)
#define MPI_INTEGER                     ((MPI_Datatype)0x00000219)
#define MPI_REAL                        ((MPI_Datatype)0x0000021a)
#define MPI_COMPLEX                     ((MPI_Datatype)0x0000021b)
#define MPI_DOUBLE_PRECISION            ((MPI_Datatype)0x0000021c)
#define MPI_DOUBLE_COMPLEX              ((MPI_Datatype)0x0000021d)
#define MPI_CHARACTER                   ((MPI_Datatype)0x0000021e)
#define MPI_LONG_DOUBLE                 ((MPI_Datatype)0x00000220)
#define MPI_C_LONG_DOUBLE_COMPLEX       ((MPI_Datatype)0x00000224)
#define MPI_CXX_LONG_DOUBLE_COMPLEX     ((MPI_Datatype)0x00000225)
#define MPI_FLOAT_INT                   ((MPI_Datatype)0x00000228)
#define MPI_DOUBLE_INT                  ((MPI_Datatype)0x00000229)
#define MPI_LONG_INT                    ((MPI_Datatype)0x0000022a)
#define MPI_2INT                        ((MPI_Datatype)0x0000022b)
#define MPI_SHORT_INT                   ((MPI_Datatype)0x0000022c)
#define MPI_LONG_DOUBLE_INT             ((MPI_Datatype)0x0000022d)
#define MPI_2REAL                       ((MPI_Datatype)0x00000230)
#define MPI_2DOUBLE_PRECISION           ((MPI_Datatype)0x00000231)
#define MPI_2INTEGER                    ((MPI_Datatype)0x00000232)
#define MPI_C_BOOL                      ((MPI_Datatype)0x00000238)
#define MPI_CXX_BOOL                    ((MPI_Datatype)0x00000239)
#define MPI_WCHAR                       ((MPI_Datatype)0x0000023c)
#define MPI_INT8_T                      ((MPI_Datatype)0x00000240)
#define MPI_UINT8_T                     ((MPI_Datatype)0x00000241)
#define MPI_CHAR                        ((MPI_Datatype)0x00000243)
#define MPI_SIGNED_CHAR                 ((MPI_Datatype)0x00000244)
#define MPI_UNSIGNED_CHAR               ((MPI_Datatype)0x00000245)
#define MPI_BYTE                        ((MPI_Datatype)0x00000247)
#define MPI_INT16_T                     ((MPI_Datatype)0x00000248)
#define MPI_UINT16_T                    ((MPI_Datatype)0x00000249)
#define MPI_INT32_T                     ((MPI_Datatype)0x00000250)
#define MPI_UINT32_T                    ((MPI_Datatype)0x00000251)
#define MPI_INT64_T                     ((MPI_Datatype)0x00000258)
#define MPI_UINT64_T                    ((MPI_Datatype)0x00000259)
#define MPI_LOGICAL1                    ((MPI_Datatype)0x000002c0)
#define MPI_INTEGER1                    ((MPI_Datatype)0x000002c1)
#define MPI_LOGICAL2                    ((MPI_Datatype)0x000002c8)
#define MPI_INTEGER2                    ((MPI_Datatype)0x000002c9)
#define MPI_REAL2                       ((MPI_Datatype)0x000002ca)
#define MPI_LOGICAL4                    ((MPI_Datatype)0x000002d0)
#define MPI_INTEGER4                    ((MPI_Datatype)0x000002d1)
#define MPI_REAL4                       ((MPI_Datatype)0x000002d2)
#define MPI_COMPLEX4                    ((MPI_Datatype)0x000002d3)
#define MPI_LOGICAL8                    ((MPI_Datatype)0x000002d8)
#define MPI_INTEGER8                    ((MPI_Datatype)0x000002d9)
#define MPI_REAL8                       ((MPI_Datatype)0x000002da)
#define MPI_COMPLEX8                    ((MPI_Datatype)0x000002db)
#define MPI_LOGICAL16                   ((MPI_Datatype)0x000002e0)
#define MPI_INTEGER16                   ((MPI_Datatype)0x000002e1)
#define MPI_REAL16                      ((MPI_Datatype)0x000002e2)
#define MPI_COMPLEX16                   ((MPI_Datatype)0x000002e3)
#define MPI_COMPLEX32                   ((MPI_Datatype)0x000002eb)
#define MPI_LONG_LONG_INT               MPI_LONG_LONG
#define MPI_C_COMPLEX                   MPI_C_FLOAT_COMPLEX

/* Special addresses and ignored arguments. */
#define MPI_BOTTOM                      ((void*)0)
#define MPI_IN_PLACE                    ((void*)1)
#define MPI_BUFFER_AUTOMATIC            ((void*)2)
#define MPI_ERRCODES_IGNORE             ((int*)0)
#define MPI_STATUS_IGNORE               ((MPI_Status*)0)
#define MPI_STATUSES_IGNORE             ((MPI_Status*)0)
#define MPI_UNWEIGHTED                  ((int*)10)
#define MPI_WEIGHTS_EMPTY               ((int*)11)
#define MPI_DISPLACEMENT_CURRENT        ((MPI_Offset)-1)
#define MPI_ARGV_NULL                   ((char **)0)
#define MPI_ARGVS_NULL                  ((char ***)0)

/* String and buffer limits. */
#define MPI_VERSION                     5
#define MPI_SUBVERSION                  0
#define MPI_ABI_VERSION                 1
#define MPI_ABI_SUBVERSION              0
#define MPI_MAX_DATAREP_STRING          128
#define MPI_MAX_ERROR_STRING            512
#define MPI_MAX_INFO_KEY                256
#define MPI_MAX_INFO_VAL                1024
#define MPI_MAX_LIBRARY_VERSION_STRING  8192
#define MPI_MAX_OBJECT_NAME             128
#define MPI_MAX_PORT_NAME               1024
#define MPI_MAX_PROCESSOR_NAME          256
#define MPI_MAX_STRINGTAG_LEN           1024
#define MPI_MAX_PSET_NAME_LEN           1024
#define MPI_BSEND_OVERHEAD              512

/* Error classes, modes, wildcards, sentinels, thread levels, comparisons,
 * kinds and keys. */
enum {
    MPI_F_STATUS_SIZE = 8,
    MPI_F_SOURCE = 0,
    MPI_F_TAG = 1,
    MPI_F_ERROR = 2,
    MPI_SUCCESS = 0,
    MPI_ERR_BUFFER = 1,
    MPI_ERR_COUNT = 2,
    MPI_ERR_TYPE = 3,
    MPI_ERR_TAG = 4,
    MPI_ERR_COMM = 5,
    MPI_ERR_RANK = 6,
    MPI_ERR_REQUEST = 7,
    MPI_ERR_ROOT = 8,
    MPI_ERR_GROUP = 9,
    MPI_ERR_OP = 10,
    MPI_ERR_TOPOLOGY = 11,
    MPI_ERR_DIMS = 12,
    MPI_ERR_ARG = 13,
    MPI_ERR_UNKNOWN = 14,
    MPI_ERR_TRUNCATE = 15,
    MPI_ERR_OTHER = 16,
    MPI_ERR_INTERN = 17,
    MPI_ERR_PENDING = 18,
    MPI_ERR_IN_STATUS = 19,
    MPI_ERR_ACCESS = 20,
    MPI_ERR_AMODE = 21,
    MPI_ERR_ASSERT = 22,
    MPI_ERR_BAD_FILE = 23,
    MPI_ERR_BASE = 24,
    MPI_ERR_CONVERSION = 25,
    MPI_ERR_DISP = 26,
    MPI_ERR_DUP_DATAREP = 27,
    MPI_ERR_FILE_EXISTS = 28,
    MPI_ERR_FILE_IN_USE = 29,
    MPI_ERR_FILE = 30,
    MPI_ERR_INFO_KEY = 31,
    MPI_ERR_INFO_NOKEY = 32,
    MPI_ERR_INFO_VALUE = 33,
    MPI_ERR_INFO = 34,
    MPI_ERR_IO = 35,
    MPI_ERR_KEYVAL = 36,
    MPI_ERR_LOCKTYPE = 37,
    MPI_ERR_NAME = 38,
    MPI_ERR_NO_MEM = 39,
    MPI_ERR_NOT_SAME = 40,
    MPI_ERR_NO_SPACE = 41,
    MPI_ERR_NO_SUCH_FILE = 42,
    MPI_ERR_PORT = 43,
    MPI_ERR_QUOTA = 44,
    MPI_ERR_READ_ONLY = 45,
    MPI_ERR_RMA_ATTACH = 46,
    MPI_ERR_RMA_CONFLICT = 47,
    MPI_ERR_RMA_RANGE = 48,
    MPI_ERR_RMA_SHARED = 49,
    MPI_ERR_RMA_SYNC = 50,
    MPI_ERR_SERVICE = 51,
    MPI_ERR_SIZE = 52,
    MPI_ERR_SPAWN = 53,
    MPI_ERR_UNSUPPORTED_DATAREP = 54,
    MPI_ERR_UNSUPPORTED_OPERATION = 55,
    MPI_ERR_WIN = 56,
    MPI_ERR_RMA_FLAVOR = 57,
    MPI_ERR_PROC_ABORTED = 58,
    MPI_ERR_VALUE_TOO_LARGE = 59,
    MPI_ERR_SESSION = 60,
    MPI_ERR_ERRHANDLER = 61,
    MPI_ERR_ABI = 62,
    MPI_ERR_LASTCODE = 0x3fff,
    MPI_MODE_APPEND = 1,
    MPI_MODE_CREATE = 2,
    MPI_MODE_DELETE_ON_CLOSE = 4,
    MPI_MODE_EXCL = 8,
    MPI_MODE_RDONLY = 16,
    MPI_MODE_RDWR = 32,
    MPI_MODE_SEQUENTIAL = 64,
    MPI_MODE_UNIQUE_OPEN = 128,
    MPI_MODE_WRONLY = 256,
    MPI_MODE_NOCHECK = 1024,
    MPI_MODE_NOPRECEDE = 2048,
    MPI_MODE_NOPUT = 4096,
    MPI_MODE_NOSTORE = 8192,
    MPI_MODE_NOSUCCEED = 16384,
    MPI_ANY_SOURCE = -1,
    MPI_ANY_TAG = -2,
    MPI_PROC_NULL = -3,
    MPI_ROOT = -4,
    MPI_UNDEFINED = -32766,
    MPI_THREAD_SINGLE = 0,
    MPI_THREAD_FUNNELED = 1024,
    MPI_THREAD_SERIALIZED = 2048,
    MPI_THREAD_MULTIPLE = 4096,
    MPI_ORDER_C = 12,
    MPI_ORDER_FORTRAN = 15,
    MPI_DISTRIBUTE_NONE = 16,
    MPI_DISTRIBUTE_BLOCK = 17,
    MPI_DISTRIBUTE_CYCLIC = 18,
    MPI_DISTRIBUTE_DFLT_DARG = 19,
    MPI_COMBINER_NAMED = 101,
    MPI_COMBINER_DUP = 102,
    MPI_COMBINER_CONTIGUOUS = 103,
    MPI_COMBINER_VECTOR = 104,
    MPI_COMBINER_HVECTOR = 105,
    MPI_COMBINER_INDEXED = 106,
    MPI_COMBINER_HINDEXED = 107,
    MPI_COMBINER_INDEXED_BLOCK = 108,
    MPI_COMBINER_HINDEXED_BLOCK = 109,
    MPI_COMBINER_STRUCT = 110,
    MPI_COMBINER_SUBARRAY = 111,
    MPI_COMBINER_DARRAY = 112,
    MPI_COMBINER_F90_REAL = 113,
    MPI_COMBINER_F90_COMPLEX = 114,
    MPI_COMBINER_F90_INTEGER = 115,
    MPI_COMBINER_RESIZED = 116,
    MPI_COMBINER_VALUE_INDEX = 117,
    MPI_TYPECLASS_INTEGER = 192,
    MPI_TYPECLASS_REAL = 193,
    MPI_TYPECLASS_COMPLEX = 194,
    MPI_IDENT = 201,
    MPI_CONGRUENT = 202,
    MPI_SIMILAR = 203,
    MPI_UNEQUAL = 204,
    MPI_CART = 211,
    MPI_GRAPH = 212,
    MPI_DIST_GRAPH = 213,
    MPI_COMM_TYPE_SHARED = 221,
    MPI_COMM_TYPE_HW_UNGUIDED = 222,
    MPI_COMM_TYPE_HW_GUIDED = 223,
    MPI_COMM_TYPE_RESOURCE_GUIDED = 224,
    MPI_LOCK_EXCLUSIVE = 301,
    MPI_LOCK_SHARED = 302,
    MPI_WIN_FLAVOR_CREATE = 311,
    MPI_WIN_FLAVOR_ALLOCATE = 312,
    MPI_WIN_FLAVOR_DYNAMIC = 313,
    MPI_WIN_FLAVOR_SHARED = 314,
    MPI_WIN_UNIFIED = 321,
    MPI_WIN_SEPARATE = 322,
    MPI_SEEK_CUR = 401,
    MPI_SEEK_END = 402,
    MPI_SEEK_SET = 403,
    MPI_KEYVAL_INVALID = 0,
    MPI_TAG_UB = 501,
    MPI_IO = 502,
    MPI_HOST = 503,
    MPI_WTIME_IS_GLOBAL = 504,
    MPI_APPNUM = 505,
    MPI_LASTUSEDCODE = 506,
    MPI_UNIVERSE_SIZE = 507,
    MPI_WIN_BASE = 601,
    MPI_WIN_DISP_UNIT = 602,
    MPI_WIN_SIZE = 603,
    MPI_WIN_CREATE_FLAVOR = 604,
    MPI_WIN_MODEL = 605,
};

/* The environment. */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Query_thread(int *provided);
int MPI_Abort(MPI_Comm comm, int errorcode);
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Get_processor_name(char *name, int *resultlen);
int MPI_Get_version(int *version, int *subversion);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Abi_get_version(int *abi_major, int *abi_minor);
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Type_size_c(MPI_Datatype datatype, MPI_Count *size);
int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);

/* Communicators. */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag);

/* Point-to-point messages. */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);

/* Requests. */
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[]);
int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status);
int MPI_Cancel(MPI_Request *request);
int MPI_Request_free(MPI_Request *request);
int MPI_Test_cancelled(const MPI_Status *status, int *flag);

/* Collectives, blocking and started (MPI_I...). */
int MPI_Barrier(MPI_Comm comm);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request *request);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request);

/* Windows and fence epochs (on MPI_COMM_WORLD or a copy of it). */
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win);
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                     MPI_Win *win);
int MPI_Win_fence(int assert, MPI_Win win);
int MPI_Win_free(MPI_Win *win);
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);
int MPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
            int target_rank, MPI_Aint target_disp, int target_count,
            MPI_Datatype target_datatype, MPI_Win win);
int MPI_Get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                   int target_rank, MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);

/* Handles as integers, and address arithmetic. */
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);
int MPI_Comm_toint(MPI_Comm comm);
MPI_Comm MPI_Comm_fromint(int comm);
int MPI_Request_toint(MPI_Request request);
MPI_Request MPI_Request_fromint(int request);
int MPI_Win_toint(MPI_Win win);
MPI_Win MPI_Win_fromint(int win);
int MPI_Type_toint(MPI_Datatype datatype);
MPI_Datatype MPI_Type_fromint(int datatype);
int MPI_Op_toint(MPI_Op op);
MPI_Op MPI_Op_fromint(int op);

/* Functions outside the subset, declared for programs that call them:
 * each returns MPI_ERR_UNSUPPORTED_OPERATION. */
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype);

#ifdef __cplusplus
}
#endif

#endif /* RMX_MPI_H */
