/* The C ABI of the gpucache runtime reader (libgpucache_runtime), for callers that cannot use the
 * C++ API in gpucache/runtime.hpp. Opaque handles, plain C types only.
 *
 * Errors: functions returning int return 0 on success and -1 on failure; the message (the same
 * text the C++ and Python APIs give) is then available from gpucache_last_error() in the calling
 * thread until its next failing call. Functions never abort on bad input.
 *
 * Lifetimes: every handle is freed with its own *_free function (NULL is accepted). Pointers a
 * handle hands out (names, host views, device pointers) stay valid while that handle lives. A
 * host or device data handle stays valid after the dataset it came from is freed.
 *
 * Compatibility: structs never change their layout, so programs built against an older header
 * keep working; newer features come as new functions and structs.
 * - Shard format 1.2 (rows of any shape, sequence columns) added GPUCACHE_KIND_SEQUENCE,
 *   GPUCACHE_MAX_ROW_DIMS, gpucache_row_shape with gpucache_dataset_column_shape,
 *   gpucache_sequence_piece with gpucache_host_get_sequence_piece, gpucache_host_row_values and
 *   gpucache_device_sequence. gpucache_column.rank is now 1 + the row's dimensions (up to 9) for
 *   tensors and 2 for sequences; gpucache_to_device uploads sequence columns too. */
#ifndef GPUCACHE_GPUCACHE_H
#define GPUCACHE_GPUCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUCACHE_API __attribute__((visibility("default")))

/* The most dimensions a row may have: a tensor column is [rows, d0, ..., d7]. */
#define GPUCACHE_MAX_ROW_DIMS 8

typedef struct gpucache_dataset gpucache_dataset;
typedef struct gpucache_host_data gpucache_host_data;
typedef struct gpucache_device_data gpucache_device_data;

enum { GPUCACHE_KIND_TENSOR = 0, GPUCACHE_KIND_TEXT = 1, GPUCACHE_KIND_SEQUENCE = 2 };
enum { GPUCACHE_PLACEMENT_DEVICE = 0, GPUCACHE_PLACEMENT_HOST_PINNED = 1 };
enum { GPUCACHE_READ_AUTOMATIC = 0, GPUCACHE_READ_REGISTER_MMAP = 1, GPUCACHE_READ_PREAD = 2 };

typedef struct {
  const char* name; /* valid while the handle that returned it lives */
  int kind;         /* GPUCACHE_KIND_* */
  int dtype;        /* the shard format's dtype code (SPEC.md): 1 = f32, 2 = f16, 3 = bf16, ... */
  const char* dtype_name; /* "f32", "bf16", "bool", ... (static storage) */
  int rank;               /* tensor: 1 + the row's dimensions (1 to 9); text 1; sequence 2 */
  uint64_t dim;           /* the innermost row dimension; 1 for scalar rows and text, 0 sequences */
  uint64_t padded_dim;    /* elements stored for the innermost dimension (>= dim) */
  uint64_t row_pitch_bytes; /* bytes from one stored row to the next; 0 for sequences */
} gpucache_column;

/* The shape of one row of a column (gpucache_dataset_column_shape). A tensor column is
 * [rows, row_shape[0], ..., row_shape[row_dims - 1]], stored row-major with the innermost
 * dimension padded to padded_dim elements (zeros), so a stored row is
 * row_shape[0] * ... * row_shape[row_dims - 2] * padded_dim elements, row_pitch_bytes bytes. */
typedef struct {
  uint32_t row_dims; /* tensor: rank - 1 (0 for one value per row); text and sequence: 0 */
  uint64_t row_shape[GPUCACHE_MAX_ROW_DIMS]; /* row_dims entries, then zeros */
  uint64_t padded_dim;
  uint64_t row_pitch_bytes;
} gpucache_row_shape;

typedef struct {
  const void* data; /* tensor: rows × row_pitch_bytes; text and sequence: rows + 1 u64 offsets */
  const void* text_bytes; /* text columns: the UTF-8 bytes the offsets index; else NULL */
  uint64_t rows;
  uint64_t first_row; /* first row of this piece within the selection */
  uint32_t shard_index;
} gpucache_host_piece;

/* One shard's part of a text or sequence column (gpucache_host_get_sequence_piece): row i of the
 * piece is values[offsets[i]] .. values[offsets[i + 1] - 1], values of the column's dtype (bytes
 * for text). These are the shard's own offsets: offsets[0] is 0 only when the piece starts at the
 * shard's first row. They were checked (never decreasing, within the values) by gpucache_to_host,
 * with or without verify. */
typedef struct {
  const uint64_t* offsets; /* rows + 1 */
  const void* values;      /* the shard's values of the column */
  uint64_t rows;
  uint64_t first_row; /* first row of this piece within the selection */
  uint32_t shard_index;
} gpucache_sequence_piece;

typedef struct {
  int verify;       /* nonzero: hash every chunk the selection touches (default 1) */
  unsigned threads; /* 0: automatic */
} gpucache_host_options;

typedef struct {
  int placement; /* GPUCACHE_PLACEMENT_* */
  int read_mode; /* GPUCACHE_READ_* */
  int verify;
  unsigned threads;
  uint64_t staging_bytes;
} gpucache_device_options;

/* The message of the calling thread's last failure ("" if none). */
GPUCACHE_API const char* gpucache_last_error(void);
/* Nonzero when a CUDA runtime can be loaded and sees at least one GPU. */
GPUCACHE_API int gpucache_cuda_available(void);

/* Datasets: a directory of shard-*.gcs plus manifest.json, or a single .gcs file, or a remote
   dataset s3://BUCKET/PREFIX or http(s)://HOST/PATH (docs/remote.md), whose shards are fetched into
   the folder GPUCACHE_CACHE names (else a temporary folder removed at gpucache_close). */
GPUCACHE_API int gpucache_open(const char* path, gpucache_dataset** out);
GPUCACHE_API void gpucache_dataset_free(gpucache_dataset* dataset);
GPUCACHE_API uint64_t gpucache_dataset_total_rows(const gpucache_dataset* dataset);
/* Rows in the selection. */
GPUCACHE_API uint64_t gpucache_dataset_rows(const gpucache_dataset* dataset);
GPUCACHE_API uint64_t gpucache_dataset_row_begin(const gpucache_dataset* dataset);
GPUCACHE_API size_t gpucache_dataset_shard_count(const gpucache_dataset* dataset);
/* Selected columns. */
GPUCACHE_API size_t gpucache_dataset_column_count(const gpucache_dataset* dataset);
GPUCACHE_API int gpucache_dataset_column(const gpucache_dataset* dataset, size_t index,
                                         gpucache_column* out);
/* The row shape of selected column `index`. */
GPUCACHE_API int gpucache_dataset_column_shape(const gpucache_dataset* dataset, size_t index,
                                               gpucache_row_shape* out);
/* Selections make a new handle; the original is unchanged and must still be freed. */
GPUCACHE_API int gpucache_select_columns(const gpucache_dataset* dataset, const char* const* names,
                                         size_t count, gpucache_dataset** out);
GPUCACHE_API int gpucache_select_rows(const gpucache_dataset* dataset, uint64_t begin, uint64_t end,
                                      gpucache_dataset** out);
/* Equal contiguous slices of the selection; the last rows % world_size rows are dropped. */
GPUCACHE_API int gpucache_for_rank(const gpucache_dataset* dataset, uint32_t rank,
                                   uint32_t world_size, gpucache_dataset** out);

/* Host: zero-copy views into the mapped shards. options may be NULL for the defaults. */
GPUCACHE_API void gpucache_host_options_init(gpucache_host_options* options);
GPUCACHE_API int gpucache_to_host(const gpucache_dataset* dataset,
                                  const gpucache_host_options* options, gpucache_host_data** out);
GPUCACHE_API void gpucache_host_data_free(gpucache_host_data* data);
GPUCACHE_API uint64_t gpucache_host_data_rows(const gpucache_host_data* data);
/* Pieces of a column (one per shard the selection touches); -1 for an unknown column. */
GPUCACHE_API int gpucache_host_piece_count(const gpucache_host_data* data, const char* column,
                                           size_t* count);
GPUCACHE_API int gpucache_host_get_piece(const gpucache_host_data* data, const char* column,
                                         size_t index, gpucache_host_piece* out);
/* A tensor column's selected rows as one contiguous array of rows × row_pitch_bytes bytes without
 *a copy, or *data_out = NULL when its shards' parts could not be joined (then read the pieces) and
 * for text and sequence columns. */
GPUCACHE_API int gpucache_host_joined(const gpucache_host_data* data, const char* column,
                                      const void** data_out);
/* Row `row` of a text column as UTF-8 bytes (not NUL-terminated) inside the mapping. */
GPUCACHE_API int gpucache_host_text(const gpucache_host_data* data, const char* column,
                                    uint64_t row, const char** text, size_t* size);
/* Piece `index` of a text or sequence column (-1 for a tensor column). */
GPUCACHE_API int gpucache_host_get_sequence_piece(const gpucache_host_data* data,
                                                  const char* column, size_t index,
                                                  gpucache_sequence_piece* out);
/* Row `row` of a text or sequence column: `*count` values of the column's dtype (bytes for text)
 * at `*values`, inside the mapping. */
GPUCACHE_API int gpucache_host_row_values(const gpucache_host_data* data, const char* column,
                                          uint64_t row, const void** values, uint64_t* count);

/* Device: the selected tensor and sequence columns in one allocation on GPU `device` (text
 * columns stay on the host). options may be NULL. */
GPUCACHE_API void gpucache_device_options_init(gpucache_device_options* options);
GPUCACHE_API int gpucache_to_device(const gpucache_dataset* dataset, int device,
                                    const gpucache_device_options* options,
                                    gpucache_device_data** out);
GPUCACHE_API void gpucache_device_data_free(gpucache_device_data* data);
GPUCACHE_API uint64_t gpucache_device_data_rows(const gpucache_device_data* data);
GPUCACHE_API uint64_t gpucache_device_data_bytes(const gpucache_device_data* data);
/* A device-accessible pointer to the column's data: a tensor column's rows × row_pitch_bytes
 * bytes ([rows, *row_shape], innermost dimension stored as padded_dim), or a sequence column's
 * values. info may be NULL. */
GPUCACHE_API int gpucache_device_column(const gpucache_device_data* data, const char* column,
                                        void** pointer, gpucache_column* info);
/* A sequence column on the device: `*count` values of its dtype at `*values`, and rows + 1 int64
 * offsets at `*offsets` rebased to the selection (offsets[0] = 0, offsets[rows] = count; row i is
 * values[offsets[i]] .. values[offsets[i + 1] - 1]). Both device-accessible, in the one
 * allocation. -1 for a column that is not a sequence. */
GPUCACHE_API int gpucache_device_sequence(const gpucache_device_data* data, const char* column,
                                          void** values, int64_t** offsets, uint64_t* count);

/* Batch order (gpucache/batch_order.hpp): which rows make up batch `batch` of an epoch, computed
 * from its index alone with a keyed bijection (no permutation is held). The Python layer and the
 * batch stream compute the same rows. */
typedef struct {
  uint64_t rows;       /* rows being ordered */
  uint64_t batch_size; /* >= 1 */
  int shuffle;         /* nonzero: keyed permutation of seed and epoch; 0: row order */
  uint64_t seed;
  uint64_t epoch;
  uint32_t rank;       /* < world_size */
  uint32_t world_size; /* >= 1; rank r takes the epoch's positions r, r + world_size, ... */
  int drop_last;       /* nonzero: rows / world_size rows per rank, short batch dropped; 0: padded
                          to ceil(rows / world_size) by repeating the first positions */
  uint64_t block_rows; /* nonzero: block shuffle (blocks of block_rows, windows of window_blocks) */
  uint64_t window_blocks;
} gpucache_order_options;

GPUCACHE_API void gpucache_order_options_init(gpucache_order_options* options);
/* Batches of this rank in the epoch. */
GPUCACHE_API int gpucache_order_batches(const gpucache_order_options* options, uint64_t* batches);
/* The rows of batch `batch`: *count (<= batch_size) row indices written to rows[0..capacity). */
GPUCACHE_API int gpucache_order_batch(const gpucache_order_options* options, uint64_t batch,
                                      uint64_t* rows, uint64_t capacity, uint64_t* count);
/* The image of `index` (< size) under the keyed bijection of [0, size) chosen by `key`. */
GPUCACHE_API int gpucache_permute(uint64_t size, uint64_t key, uint64_t index, uint64_t* out);

/* The batch stream (gpucache/batch_stream.hpp): batches of a dataset read from the shards as they
 * are needed, `prefetch` ahead, by reader threads; for a GPU copied on the stream's own CUDA
 * stream. Each chunk is hash-checked once per epoch before its rows are handed out. */
typedef struct gpucache_stream gpucache_stream;
typedef struct gpucache_batch gpucache_batch;

typedef struct {
  gpucache_order_options order; /* rows: ignored (the dataset's); epoch: the first epoch */
  int device;                   /* -1: host batches; else the CUDA device */
  unsigned prefetch;            /* batches gathered ahead (default 4) */
  unsigned threads;             /* reader threads; 0: automatic */
  int verify;                   /* default 1 */
} gpucache_stream_options;

GPUCACHE_API void gpucache_stream_options_init(gpucache_stream_options* options);
GPUCACHE_API int gpucache_stream_open(const gpucache_dataset* dataset,
                                      const gpucache_stream_options* options,
                                      gpucache_stream** out);
GPUCACHE_API void gpucache_stream_free(gpucache_stream* stream);
/* Batches per epoch (of this rank). */
GPUCACHE_API uint64_t gpucache_stream_batches(const gpucache_stream* stream);
/* The epoch and batch index of the next batch. */
GPUCACHE_API void gpucache_stream_position(const gpucache_stream* stream, uint64_t* epoch,
                                           uint64_t* batch);
/* Makes batch `batch` of epoch `epoch` the next one (resuming, set_epoch). */
GPUCACHE_API int gpucache_stream_seek(gpucache_stream* stream, uint64_t epoch, uint64_t batch);
/* The next batch, or *out = NULL at the end of the epoch (the stream then stands at batch 0 of
 * the next epoch). The batch stays valid until gpucache_batch_free, also after the stream goes. */
GPUCACHE_API int gpucache_stream_next(gpucache_stream* stream, gpucache_batch** out);
GPUCACHE_API void gpucache_batch_free(gpucache_batch* batch);
GPUCACHE_API uint64_t gpucache_batch_rows(const gpucache_batch* batch);
/* The rows (of the dataset selection) in the batch, on the host. */
GPUCACHE_API const uint64_t* gpucache_batch_row_indices(const gpucache_batch* batch);
/* A column of the batch: tensor columns rows × row_pitch_bytes bytes at *data (offsets NULL,
 * values 0); text and sequence columns *values values at *data and rows + 1 int64 *offsets from 0.
 * Device memory for a GPU stream. Any output may be NULL. */
GPUCACHE_API int gpucache_batch_column(const gpucache_batch* batch, const char* column, void** data,
                                       uint64_t* bytes, int64_t** offsets, uint64_t* values);
/* GPU batches: work enqueued on `cuda_stream` (a cudaStream_t) after this waits for the batch's
 * copy, without blocking the host. No-op for host batches. */
GPUCACHE_API int gpucache_batch_wait(const gpucache_batch* batch, void* cuda_stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUCACHE_GPUCACHE_H */
