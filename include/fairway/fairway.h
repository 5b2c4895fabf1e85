/*
 * Fairway: collective communication for distributed deep learning.
 *
 * The C API follows NCCL's shape: result codes, a unique id passed from one
 * rank to the others, communicators, and collectives that take a stream.
 * Host buffers pass a NULL stream and the call completes before it returns;
 * the fwI* variants (host buffers only) return a request to test or wait on.
 * Device (CUDA) buffers take the stream that orders them, as in NCCL: the
 * call enqueues the work on that stream and returns; the work starts after
 * what precedes it on the stream, and what follows sees the result. Where
 * the data moves through the host (UCX, staging), a worker thread of the
 * communicator does it when the stream reaches the call; its failures show
 * in fwCommGetAsyncError and fail the next call.
 *
 * Every function returns a fwResult_t. On failure, fwGetLastErrorMessage()
 * returns a message for the calling thread that names what was wrong.
 */
#ifndef FAIRWAY_FAIRWAY_H_
#define FAIRWAY_FAIRWAY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAIRWAY_MAJOR 0
#define FAIRWAY_MINOR 1
#define FAIRWAY_PATCH 0
#define FAIRWAY_VERSION_CODE (FAIRWAY_MAJOR * 10000 + FAIRWAY_MINOR * 100 + FAIRWAY_PATCH)

#if defined(__GNUC__)
#define FAIRWAY_API __attribute__((visibility("default")))
#else
#define FAIRWAY_API
#endif

/* In C++ the enums below have int as their underlying type, so any int a
 * caller passes (from C, Python's ctypes or a cast) is a value of the type
 * and the library can range-check it; in C they are plain enums, passed the
 * same way. */
#ifdef __cplusplus
#define FAIRWAY_ENUM_BASE : int
#else
#define FAIRWAY_ENUM_BASE
#endif

typedef enum FAIRWAY_ENUM_BASE {
  fwSuccess = 0,
  fwInvalidArgument = 1,   /* a malformed argument not covered below */
  fwInvalidPointer = 2,    /* NULL buffer with count > 0, NULL out-parameter */
  fwInvalidCount = 3,      /* count whose byte size overflows */
  fwInvalidDatatype = 4,   /* not a fwDataType_t */
  fwInvalidOp = 5,         /* not a fwRedOp_t */
  fwOpNotSupportedForType = 6, /* e.g. bitwise ops on floating types */
  fwInvalidRank = 7,       /* root or peer out of range */
  fwInvalidComm = 8,       /* NULL, destroyed or never created communicator */
  fwInvalidUsage = 9,      /* valid arguments in an invalid order or state */
  fwCollectiveMismatch = 10, /* ranks called different collectives */
  fwRemoteError = 11,      /* a peer failed or aborted */
  fwTimeout = 12,          /* nothing arrived within FAIRWAY_TIMEOUT_MS */
  fwTransportError = 13,   /* the transport reported an error */
  fwSystemError = 14,      /* an operating-system call failed */
  fwInternalError = 15,    /* a bug in Fairway */
  fwAuthError = 16,        /* bootstrap rejected: wrong job secret or id */
  fwNotAvailable = 17,     /* feature not built or not usable here */
  fwInProgress = 18,       /* fwTest: the request has not completed */
  fwUnsupportedCompression = 19, /* a compression descriptor, or its use with this
                                    collective, type or op, that Fairway does not offer */
  fwRevoked = 20,          /* the communicator was revoked (fwCommRevoke), here or by a peer */
  fwNumResults = 21
} fwResult_t;

typedef enum FAIRWAY_ENUM_BASE {
  fwInt8 = 0, fwUint8 = 1,
  fwInt32 = 2, fwUint32 = 3,
  fwInt64 = 4, fwUint64 = 5,
  fwFloat16 = 6, fwBfloat16 = 7,
  fwFloat32 = 8, fwFloat64 = 9,
  /* 8-bit floats as NCCL 2.24 has them: e4m3 (the "fn" variant: no
   * infinities, max 448) and e5m2 (max 57344). Reductions compute in
   * float32 and round to nearest even, saturating to the largest finite
   * value; NaN stays NaN. */
  fwFloat8e4m3 = 10, fwFloat8e5m2 = 11,
  fwNumTypes = 12
} fwDataType_t;

typedef enum FAIRWAY_ENUM_BASE {
  fwSum = 0, fwProd = 1, fwMax = 2, fwMin = 3, fwAvg = 4,
  fwBand = 5, fwBor = 6, fwBxor = 7, /* integer types only */
  fwNumOps = 8
} fwRedOp_t;

#define FAIRWAY_UNIQUE_ID_BYTES 128
typedef struct { char internal[FAIRWAY_UNIQUE_ID_BYTES]; } fwUniqueId;

typedef struct fwComm* fwComm_t;
typedef struct fwRequest* fwRequest_t;
/* A cudaStream_t for device buffers; NULL for host buffers. */
typedef void* fwStream_t;

/* Color that leaves a rank out of every communicator fwCommSplit creates. */
#define FAIRWAY_SPLIT_NOCOLOR (-1)

FAIRWAY_API fwResult_t fwGetVersion(int* version);
FAIRWAY_API const char* fwGetErrorString(fwResult_t result);
/* Detail of the calling thread's last failed call ("" if none). */
FAIRWAY_API const char* fwGetLastErrorMessage(void);

/* Rank 0 creates the id (it starts the bootstrap root in this process) and
 * passes it to every rank, which then calls fwCommInitRank. */
FAIRWAY_API fwResult_t fwGetUniqueId(fwUniqueId* uniqueId);
/* Stops the bootstrap root fwGetUniqueId started in this process for
 * uniqueId, at once: an id made but not used (offered for a formation that
 * chose another process's id) frees its thread and port instead of holding
 * them until FAIRWAY_TIMEOUT_MS passes with no rank. Ranks forming a
 * communicator through it fail, told why. An id this process does not
 * serve (made elsewhere, or its root has ended) gets fwInvalidUsage. */
FAIRWAY_API fwResult_t fwReleaseUniqueId(fwUniqueId uniqueId);
FAIRWAY_API fwResult_t fwCommInitRank(fwComm_t* comm, int nranks, fwUniqueId commId, int rank);

/* Settings of one communicator that override the environment's. Start
 * from FW_CONFIG_INITIALIZER (it sets `size`, so fields added later keep
 * their defaults for older callers); a field left at its initial value
 * takes the environment's setting. Communicators split from it inherit them. */
typedef struct {
  size_t size;          /* sizeof(fwConfig_t), set by the initializer */
  long long timeoutMs;  /* bounds every wait, as FAIRWAY_TIMEOUT_MS; 0: the environment's */
} fwConfig_t;
#define FW_CONFIG_INITIALIZER {sizeof(fwConfig_t), 0}
FAIRWAY_API fwResult_t fwCommInitRankConfig(fwComm_t* comm, int nranks, fwUniqueId commId, int rank,
                                            const fwConfig_t* config);
/* Rank, size and root from the launcher's environment: FAIRWAY_RANK/
 * FAIRWAY_WORLD_SIZE, torchrun's RANK/WORLD_SIZE, Open MPI's
 * OMPI_COMM_WORLD_*, Slurm's SLURM_PROCID/SLURM_NTASKS; the root from
 * FAIRWAY_COMM_ID=host:port or MASTER_ADDR/MASTER_PORT (see docs/usage.md). */
FAIRWAY_API fwResult_t fwCommInitFromEnv(fwComm_t* comm);
FAIRWAY_API fwResult_t fwCommSplit(fwComm_t comm, int color, int key, fwComm_t* newcomm);
/* Waits (bounded by FAIRWAY_TIMEOUT_MS) for the other ranks to finish with
 * the communicator, then frees it. */
FAIRWAY_API fwResult_t fwCommDestroy(fwComm_t comm);
/* Frees the communicator at once and tells the peers it is gone; their
 * pending and later calls on it fail with fwRemoteError. */
FAIRWAY_API fwResult_t fwCommAbort(fwComm_t comm);
FAIRWAY_API fwResult_t fwCommCount(const fwComm_t comm, int* count);
FAIRWAY_API fwResult_t fwCommUserRank(const fwComm_t comm, int* rank);
/* fwSuccess while healthy, else the error that broke the communicator or
 * that NCCL reported for work already enqueued on a stream. */
FAIRWAY_API fwResult_t fwCommGetAsyncError(fwComm_t comm, fwResult_t* asyncError);

/* ---- Why a job hangs (docs/debugging.md) ----
 * Every communicator keeps a flight record of its last operations
 * (FAIRWAY_TRACE_ENTRIES). A dump holds every live communicator of the
 * process, in torch's flight-recorder format, in one file of dir named
 * pid<PID>.fairway_rank<RANK>; `fairway-trace DIR` reads all ranks' dumps
 * and names the culprit. dir NULL or "": FAIRWAY_TRACE_DIR (fwInvalidUsage
 * where neither is set). Callable from any thread, on a broken
 * communicator too; it does not wait for the peers. */
FAIRWAY_API fwResult_t fwCommDumpTrace(fwComm_t comm, const char* dir);

/* ---- Surviving a lost rank (docs/recovery.md) ----
 * A communicator has three states. Healthy. Broken: a rank failed (died,
 * stopped past FAIRWAY_TIMEOUT_MS, lost its connection) or aborted; every
 * pending and later call fails, naming the cause (fwRemoteError, fwTimeout),
 * and the ranks that saw the failure tell the others. Revoked: a rank
 * called fwCommRevoke; every rank's pending and later calls fail with
 * fwRevoked, whether or not it saw a failure itself. A broken or revoked
 * communicator still serves fwCommGetFailedRanks, fwCommShrink, and
 * fwCommDestroy/fwCommAbort. */

/* Revokes the communicator on every live rank: callable from any thread,
 * on any rank, healthy or broken; the revocation is relayed by every rank
 * that receives it, so it reaches each live rank even if its sender dies. */
FAIRWAY_API fwResult_t fwCommRevoke(fwComm_t comm);
/* The ranks this rank knows to have failed, ascending: seen here (a process
 * that exited, a lost connection, a peer silent past FAIRWAY_TIMEOUT_MS) or
 * named in a peer's failure notice. Up to `capacity` go to failedRanks;
 * *count gets how many there are (call with capacity 0 to size the array). */
FAIRWAY_API fwResult_t fwCommGetFailedRanks(fwComm_t comm, int* failedRanks, int capacity, int* count);

#define FAIRWAY_SHRINK_DEFAULT 0 /* in-flight work ends (completes or fails) first */
#define FAIRWAY_SHRINK_ABORT 1   /* revokes first: in-flight work fails at once */
/* Called by every surviving rank, the same number of times: the survivors
 * agree on the ranks to leave out (excludeRanks, the same list on every
 * survivor, plus every rank that failed, before or during the agreement;
 * no step depends on rank 0 or the bootstrap root being alive) and make a
 * new communicator of the others, ranks renumbered in their old order.
 * Survivors that passed different lists get fwInvalidUsage naming them; a
 * rank that others left out gets fwRemoteError. Each exchange is bounded by
 * FAIRWAY_TIMEOUT_MS and leaves a silent rank out, so the agreement ends
 * however many ranks die during it. The old communicator is left broken
 * (or revoked): destroy it. */
FAIRWAY_API fwResult_t fwCommShrink(fwComm_t comm, const int* excludeRanks, int excludeCount, int flags,
                                    fwComm_t* newcomm);

#define FAIRWAY_GROW_MEMBER (-1) /* fwCommGrow's rank on a member: it keeps its rank */
/* Grows a communicator with processes that were not in it (replacements
 * for lost ranks, or more): the new communicator has nranks ranks, the
 * members first with the ranks they had, the joining processes after them.
 * Every member of comm calls fwCommGrow(comm, nranks, growId,
 * FAIRWAY_GROW_MEMBER, &newcomm); each joining process calls
 * fwCommGrow(NULL, nranks, growId, rank, &newcomm), with a rank from comm's
 * size to nranks - 1. growId comes from fwGetUniqueId on one member (its
 * process serves the formation), which gives it to the other members (for
 * instance by fwBroadcast over comm) and to the joining processes (out of
 * band). Members keep comm's settings (fwConfig_t); joining processes take
 * the environment's. comm stays as it was: destroy it when done. A process
 * that calls fwCommInitRank with growId, or a joining rank below comm's
 * size, makes every rank's call fail with fwInvalidUsage saying which. */
FAIRWAY_API fwResult_t fwCommGrow(fwComm_t comm, int nranks, fwUniqueId growId, int rank, fwComm_t* newcomm);

/* Device memory for buffers of device calls, on the calling thread's
 * current device (cudaMalloc), from the device runtime communicators use
 * (FAIRWAY_DEVICE_RUNTIME). fwMemFree(NULL) does nothing. */
FAIRWAY_API fwResult_t fwMemAlloc(void** ptr, size_t size);
FAIRWAY_API fwResult_t fwMemFree(void* ptr);

/* Host memory that the node's other ranks can map: a buffer of host
 * collectives allocated here is read and written by its peers with plain
 * loads and stores, where any other host buffer is reached through the
 * kernel's copy (process_vm_readv), about half as fast. Page-aligned,
 * zeroed, usable as any other host memory. Where peers may not map it (the
 * same ptrace rule as the kernel's copy) collectives fall back as for any
 * buffer. fwHostMemFree takes only what fwHostMemAlloc returned;
 * fwHostMemFree(NULL) does nothing. Free a buffer only once no collective
 * on it runs. */
FAIRWAY_API fwResult_t fwHostMemAlloc(void** ptr, size_t size);
FAIRWAY_API fwResult_t fwHostMemFree(void* ptr);

/* ---- Blocking collectives: host buffers with a NULL stream, device
 * buffers with their stream (NULL is CUDA's default stream then) ---- */
FAIRWAY_API fwResult_t fwAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwStream_t stream);
/* recvbuff holds recvcount elements; sendbuff holds nranks * recvcount. */
FAIRWAY_API fwResult_t fwReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwStream_t stream);
/* sendbuff holds sendcount elements; recvbuff holds nranks * sendcount. */
FAIRWAY_API fwResult_t fwAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    fwDataType_t datatype, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwBroadcast(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, int root, fwComm_t comm, fwStream_t stream);
/* recvbuff is used on the root only. */
FAIRWAY_API fwResult_t fwReduce(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, int root, fwComm_t comm, fwStream_t stream);
/* count elements go to (and come from) each rank. */
FAIRWAY_API fwResult_t fwAllToAll(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwComm_t comm, fwStream_t stream);
/* Counts and displacements are in elements, one per rank. */
FAIRWAY_API fwResult_t fwAllToAllv(const void* sendbuff, const size_t* sendcounts,
    const size_t* sdispls, void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
    fwDataType_t datatype, fwComm_t comm, fwStream_t stream);
/* recvbuff (nranks * sendcount) is used on the root only. */
FAIRWAY_API fwResult_t fwGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    fwDataType_t datatype, int root, fwComm_t comm, fwStream_t stream);
/* sendbuff (nranks * recvcount) is used on the root only. */
FAIRWAY_API fwResult_t fwScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    fwDataType_t datatype, int root, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwBarrier(fwComm_t comm, fwStream_t stream);
/* Matched in call order between each pair of ranks. Two ranks that each
 * send a large message to the other before receiving need fwIsend/fwIrecv. */
FAIRWAY_API fwResult_t fwSend(const void* sendbuff, size_t count, fwDataType_t datatype,
    int peer, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwRecv(void* recvbuff, size_t count, fwDataType_t datatype,
    int peer, fwComm_t comm, fwStream_t stream);

/* ---- Non-blocking variants: same arguments plus a request ----
 * Collectives on one communicator run in call order; buffers must stay
 * untouched until the request completes. fwWait and a fwTest that reports
 * completion release the request and return the operation's result. */
FAIRWAY_API fwResult_t fwIallReduce(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIallGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    fwDataType_t datatype, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIbroadcast(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, int root, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIreduce(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, int root, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIallToAll(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIallToAllv(const void* sendbuff, const size_t* sendcounts,
    const size_t* sdispls, void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
    fwDataType_t datatype, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIgather(const void* sendbuff, void* recvbuff, size_t sendcount,
    fwDataType_t datatype, int root, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIscatter(const void* sendbuff, void* recvbuff, size_t recvcount,
    fwDataType_t datatype, int root, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIbarrier(fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIsend(const void* sendbuff, size_t count, fwDataType_t datatype,
    int peer, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIrecv(void* recvbuff, size_t count, fwDataType_t datatype,
    int peer, fwComm_t comm, fwRequest_t* request);

/* ---- Tagged messages and receives from any source (host buffers) ----
 * Messages of one tag between a pair of ranks match in call order; messages
 * of different tags match independently of each other. fwSend and fwRecv
 * are tag 0. Tags run from 0 to FAIRWAY_MAX_TAG.
 * A receive whose peer is FAIRWAY_ANY_SOURCE takes the first message of its
 * tag to arrive from any rank (this one included), never one that its
 * sender sent after another of the same tag not yet received; a blocking
 * one fails with fwTimeout after FAIRWAY_TIMEOUT_MS without a message.
 * source (may be NULL) gets the sender's rank once the receive completes.
 * Device buffers take tag 0 and a named peer (a receive from any source
 * or another tag is fwInvalidUsage there): device messages match in call
 * order, as NCCL's do. */
#define FAIRWAY_ANY_SOURCE (-1)
#define FAIRWAY_MAX_TAG 262143
FAIRWAY_API fwResult_t fwSendTagged(const void* sendbuff, size_t count, fwDataType_t datatype,
    int peer, int tag, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwRecvTagged(void* recvbuff, size_t count, fwDataType_t datatype,
    int peer, int tag, int* source, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwIsendTagged(const void* sendbuff, size_t count, fwDataType_t datatype,
    int peer, int tag, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIrecvTagged(void* recvbuff, size_t count, fwDataType_t datatype,
    int peer, int tag, int* source, fwComm_t comm, fwRequest_t* request);

/* ---- List forms (host buffers) ----
 * Rank r's block at an address of its own instead of at r * count of one
 * buffer: recvbuffs[r] (allgather) or sendbuffs[r] (reduce-scatter), one
 * per rank, count elements each; what torch's all_gather into a list and
 * reduce_scatter from one pass. Ranks may mix these and the plain calls in
 * one collective. The array is read during the call only. Output blocks
 * may not overlap each other; in place means sendbuff == recvbuffs[rank]
 * (allgather) or recvbuff == sendbuffs[rank] (reduce-scatter). Inside a
 * node the shared-memory provider copies each block where it lies; other
 * paths pack the blocks into one buffer first. Device buffers and a
 * non-NULL stream are fwInvalidUsage (device buffers go in one buffer to
 * fwAllGather and fwReduceScatter). */
FAIRWAY_API fwResult_t fwAllGatherList(const void* sendbuff, void* const* recvbuffs, size_t sendcount,
    fwDataType_t datatype, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwReduceScatterList(const void* const* sendbuffs, void* recvbuff,
    size_t recvcount, fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwIallGatherList(const void* sendbuff, void* const* recvbuffs,
    size_t sendcount, fwDataType_t datatype, fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIreduceScatterList(const void* const* sendbuffs, void* recvbuff,
    size_t recvcount, fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwRequest_t* request);

/* ---- Compressed collectives ----
 * The payload crosses the network compressed; everything else is the plain
 * collective's contract. Each element is quantized at most twice end to
 * end, never once per hop: a reduce-scatter quantizes each rank's input
 * once (across nodes: each node's partial sums, summed in full precision
 * inside the node first), and the owner of each shard dequantizes and sums
 * it in float32; an allreduce then quantizes the reduced shard once more
 * and everyone dequantizes the same bytes, so every rank gets the same
 * result. Types: float32, float16, bfloat16. Ops: fwSum and fwAvg.
 * Anything else returns fwUnsupportedCompression with a message. */
typedef enum FAIRWAY_ENUM_BASE {
  fwCompressNone = 0, /* the plain collective */
  fwCompressFp16 = 1, /* cast to float16 (round to nearest even) */
  fwCompressBf16 = 2, /* cast to bfloat16 (round to nearest even) */
  fwCompressInt8 = 3, /* blocks of blockSize values: one float32 scale (absmax / 127)
                         and int8 values, round to nearest */
  fwCompressInt4 = 4, /* the same with 4-bit values (absmax / 7), two per byte */
  fwNumCompressions = 5
} fwCompressKind_t;

/* Start from FW_COMPRESSION_INITIALIZER. A block holding Inf or NaN
 * decodes as NaN throughout (that block only; the others are unaffected).
 * residual (reductions only): NULL, or one float32 per element of this
 * rank's input (count for allreduce, nranks * recvcount for reduce-scatter)
 * in the input's memory, zeroed before the first call: each call adds it
 * to the input before quantizing and leaves in it what this rank's
 * quantizations lost (error feedback), so the losses are sent later
 * instead of dropped. It must not overlap sendbuff or recvbuff, and lives
 * where they do (host or device memory). fwCompressNone ignores it. */
typedef struct {
  size_t size;              /* sizeof(fwCompression_t), set by the initializer */
  fwCompressKind_t kind;
  int blockSize;            /* int8/int4: a power of two from 32 to 4096; 0: 256 */
  float* residual;
} fwCompression_t;
#define FW_COMPRESSION_INITIALIZER {sizeof(fwCompression_t), fwCompressNone, 0, NULL}

FAIRWAY_API fwResult_t fwAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm,
    fwStream_t stream);
FAIRWAY_API fwResult_t fwReduceScatterCompressed(const void* sendbuff, void* recvbuff,
    size_t recvcount, fwDataType_t datatype, fwRedOp_t op, const fwCompression_t* compression,
    fwComm_t comm, fwStream_t stream);
/* The casts only (fp16, bf16): every rank receives the same rounded values. */
FAIRWAY_API fwResult_t fwAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount,
    fwDataType_t datatype, const fwCompression_t* compression, fwComm_t comm, fwStream_t stream);
FAIRWAY_API fwResult_t fwIallReduceCompressed(const void* sendbuff, void* recvbuff, size_t count,
    fwDataType_t datatype, fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm,
    fwRequest_t* request);
FAIRWAY_API fwResult_t fwIreduceScatterCompressed(const void* sendbuff, void* recvbuff,
    size_t recvcount, fwDataType_t datatype, fwRedOp_t op, const fwCompression_t* compression,
    fwComm_t comm, fwRequest_t* request);
FAIRWAY_API fwResult_t fwIallGatherCompressed(const void* sendbuff, void* recvbuff,
    size_t sendcount, fwDataType_t datatype, const fwCompression_t* compression, fwComm_t comm,
    fwRequest_t* request);

/* ---- One entry point for every operation ----
 * An operation described once, posted in whichever form the caller needs:
 * with a request, the non-blocking form (the fwI* call, host buffers);
 * without, the blocking form on host buffers (NULL stream) or the
 * stream-ordered one on device buffers. What a binding (the PyTorch
 * backend) calls instead of choosing among the calls above; the checks,
 * errors and results are those calls'. Start from FW_OP_ARGS_INITIALIZER
 * (it sets `size`, so fields added later keep their defaults); fields an
 * operation does not use are ignored. List forms: recvbuffs (allgather) or
 * sendbuffs (reduce-scatter) set. A compression descriptor makes
 * allreduce, reduce-scatter or allgather compressed. Messages: peer, tag
 * (0: fwSend/fwRecv's), and a receive's source (may be NULL). */
typedef enum {
  fwOpAllReduce = 0, fwOpReduceScatter = 1, fwOpAllGather = 2, fwOpBroadcast = 3, fwOpReduce = 4,
  fwOpAllToAll = 5, fwOpAllToAllv = 6, fwOpGather = 7, fwOpScatter = 8, fwOpBarrier = 9,
  fwOpSend = 10, fwOpRecv = 11,
  fwNumOpTypes
} fwOpType_t;
typedef struct {
  size_t size;                  /* sizeof(fwOpArgs_t), set by the initializer */
  fwOpType_t type;
  const void* sendbuff;
  void* recvbuff;
  size_t count;                 /* as the operation's own call names it: count, sendcount, recvcount */
  fwDataType_t datatype;
  fwRedOp_t op;
  int root;
  const size_t* sendcounts;     /* all-to-all-v: counts and displacements, one per rank */
  const size_t* sdispls;
  const size_t* recvcounts;
  const size_t* rdispls;
  void* const* recvbuffs;       /* allgather's list form */
  const void* const* sendbuffs; /* reduce-scatter's list form */
  const fwCompression_t* compression;
  int peer;
  int tag;
  int* source;
  /* The caller's own number for this operation (the PyTorch backend's:
   * torch's sequence number), kept beside Fairway's in its flight-record
   * entry (docs/debugging.md); 0: none. */
  unsigned long long callerSequence;
} fwOpArgs_t;
#define FW_OP_ARGS_INITIALIZER \
  {sizeof(fwOpArgs_t), fwOpAllReduce, NULL, NULL, 0, fwFloat32, fwSum, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0}
/* A request and a stream together are fwInvalidUsage (non-blocking calls
 * take host buffers, which no stream orders). */
FAIRWAY_API fwResult_t fwPost(const fwOpArgs_t* args, fwComm_t comm, fwStream_t stream, fwRequest_t* request);

/* *done = 1 and the operation's result once complete (request released);
 * *done = 0 and fwSuccess while it runs. A request is released exactly
 * once: fwTest or fwWait on a released request, or on anything that never
 * was one, returns fwInvalidArgument (fwInvalidPointer for NULL). */
FAIRWAY_API fwResult_t fwTest(fwRequest_t request, int* done);
FAIRWAY_API fwResult_t fwWait(fwRequest_t request);

/* Completion notification, so a caller need not keep a thread testing its
 * requests. fn(result, arg) runs exactly once, with the operation's
 * result, when the operation completes or fails:
 *  - inside the fwWait or fwTest that completes the request, on its
 *    thread, before that call returns; or else
 *  - on a Fairway thread (the communicator's worker for collectives, its
 *    progress thread for messages), which releases the request once fn
 *    has returned: a fwWait or fwTest begun after that returns
 *    fwInvalidArgument, one begun before returns the operation's result; or
 *  - inside this call, when the operation has completed already.
 * Destroying or aborting the communicator runs a pending fn with the error.
 * Inside fn, fwGetLastErrorMessage describes a failure. fn must return
 * promptly and must not wait for later calls on the same communicator.
 * One notification per request: a second is fwInvalidUsage. */
typedef void (*fwCompletionFn_t)(fwResult_t result, void* arg);
FAIRWAY_API fwResult_t fwRequestOnComplete(fwRequest_t request, fwCompletionFn_t fn, void* arg);

#ifdef __cplusplus
}
#endif

#endif /* FAIRWAY_FAIRWAY_H_ */
