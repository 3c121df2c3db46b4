/* A C99 program built against the installed package (find_package(gpucache), gpucache::runtime, or
 * pkg-config): loads a packed dataset to the host through the C ABI and checks every value
 * against the .npy it was packed from. Usage: consumer_c DATASET_DIR SOURCE.npy */
#include <gpucache/gpucache.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "consumer_c: FAILED: %s\n", what);
    ++failures;
  }
}

/* A little-endian f32, C-order [rows, cols] .npy: all the test packs, so all this reads. */
typedef struct {
  uint64_t rows, cols;
  float* values;
} matrix;

static int read_npy(const char* path, matrix* out) {
  unsigned char prefix[12];
  char* header = NULL;
  int ok = 0;
  FILE* file = fopen(path, "rb");
  if (file && fread(prefix, 1, sizeof prefix, file) == sizeof prefix &&
      memcmp(prefix, "\x93NUMPY", 6) == 0) {
    const int wide = prefix[6] >= 2; /* versions 2 and 3 have a 4-byte header length */
    size_t length = (size_t)prefix[8] | (size_t)prefix[9] << 8;
    if (wide) length |= (size_t)prefix[10] << 16 | (size_t)prefix[11] << 24;
    const long data_offset = (long)((wide ? 12 : 10) + length);
    header = calloc(length + 1, 1);
    const char* shape = NULL;
    if (header && fseek(file, wide ? 12 : 10, SEEK_SET) == 0 &&
        fread(header, 1, length, file) == length && strstr(header, "'descr': '<f4'") &&
        strstr(header, "'fortran_order': False") && (shape = strstr(header, "'shape': (")) &&
        sscanf(shape, "'shape': (%" SCNu64 ", %" SCNu64 ")", &out->rows, &out->cols) == 2) {
      const size_t count = (size_t)(out->rows * out->cols);
      out->values = malloc(count * sizeof(float) + 1);
      ok = out->values && fseek(file, data_offset, SEEK_SET) == 0 &&
           fread(out->values, sizeof(float), count, file) == count && fgetc(file) == EOF;
    }
  }
  if (!ok)
    fprintf(stderr, "consumer_c: %s: not a C-order little-endian f32 [rows, cols] .npy\n", path);
  free(header);
  if (file) fclose(file);
  return ok;
}

/* Compares every row of the host embedding column with the source, piece by piece. */
static void check_embedding(const gpucache_host_data* host, const gpucache_column* column,
                            const matrix* source, uint64_t source_first_row) {
  size_t pieces = 0;
  uint64_t rows_seen = 0, mismatches = 0;
  expect(gpucache_host_piece_count(host, "embedding", &pieces) == 0, "piece count");
  for (size_t p = 0; p < pieces; ++p) {
    gpucache_host_piece piece;
    if (gpucache_host_get_piece(host, "embedding", p, &piece) != 0) {
      expect(0, gpucache_last_error());
      return;
    }
    expect(piece.first_row == rows_seen, "pieces are in row order");
    for (uint64_t r = 0; r < piece.rows; ++r) {
      const char* row = (const char*)piece.data + r * column->row_pitch_bytes;
      const float* expected = source->values + (source_first_row + rows_seen + r) * source->cols;
      if (memcmp(row, expected, source->cols * sizeof(float)) != 0) ++mismatches;
    }
    rows_seen += piece.rows;
  }
  expect(rows_seen == gpucache_host_data_rows(host), "the pieces cover every row");
  expect(mismatches == 0, "every row equals the source .npy");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer_c DATASET_DIR SOURCE.npy\n");
    return 2;
  }
  matrix source = {0, 0, NULL};
  if (!read_npy(argv[2], &source)) return 1;

  gpucache_dataset* dataset = NULL;
  if (gpucache_open(argv[1], &dataset) != 0) {
    fprintf(stderr, "consumer_c: FAILED: %s\n", gpucache_last_error());
    free(source.values);
    return 1;
  }
  if (gpucache_dataset_total_rows(dataset) != source.rows) {
    fprintf(stderr, "consumer_c: FAILED: %" PRIu64 " rows, the source has %" PRIu64 "\n",
            gpucache_dataset_total_rows(dataset), source.rows);
    gpucache_dataset_free(dataset);
    free(source.values);
    return 1;
  }
  expect(gpucache_dataset_shard_count(dataset) > 1, "the dataset has several shards");

  gpucache_column embedding;
  int found = 0;
  for (size_t c = 0; c < gpucache_dataset_column_count(dataset); ++c)
    if (gpucache_dataset_column(dataset, c, &embedding) == 0 &&
        strcmp(embedding.name, "embedding") == 0) {
      found = embedding.dim == source.cols;
      break;
    }
  expect(found, "the dataset has an embedding column as wide as the source");

  gpucache_host_data* host = NULL;
  if (found && gpucache_to_host(dataset, NULL, &host) == 0) {
    expect(gpucache_host_data_rows(host) == source.rows, "host rows equal the source's");
    expect(strcmp(embedding.dtype_name, "f32") == 0, "the embedding column is f32");
    check_embedding(host, &embedding, &source, 0);
  } else if (found) {
    expect(0, gpucache_last_error());
  }

  /* The second of two ranks gets the second half, across a shard boundary. */
  gpucache_dataset* rank = NULL;
  gpucache_host_data* rank_host = NULL;
  if (found && gpucache_for_rank(dataset, 1, 2, &rank) == 0 &&
      gpucache_to_host(rank, NULL, &rank_host) == 0) {
    expect(gpucache_host_data_rows(rank_host) == source.rows / 2, "rank 1 of 2 gets half");
    check_embedding(rank_host, &embedding, &source, source.rows / 2);
  } else {
    expect(0, gpucache_last_error());
  }

  gpucache_dataset* missing = NULL;
  char missing_path[4096];
  snprintf(missing_path, sizeof missing_path, "%s/missing", argv[1]);
  expect(gpucache_open(missing_path, &missing) == -1 && missing == NULL &&
             strstr(gpucache_last_error(), "missing") != NULL,
         "opening a missing dataset fails with a message naming it");

  if (failures == 0)
    printf("consumer_c: %" PRIu64 " rows x %" PRIu64 " f32 in %zu shards match %s\n",
           gpucache_host_data_rows(host), embedding.dim, gpucache_dataset_shard_count(dataset),
           argv[2]);
  gpucache_host_data_free(rank_host);
  gpucache_dataset_free(rank);
  gpucache_host_data_free(host);
  gpucache_dataset_free(dataset);
  free(source.values);
  return failures == 0 ? 0 : 1;
}
