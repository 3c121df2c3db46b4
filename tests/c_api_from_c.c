/* Compiled as C (C99) into test_c_api: proves gpucache.h is a valid C header and usable from C. */
#include "gpucache/gpucache.h"

/* Rows of the rank's slice of the dataset at `path`, or -1 on any error. */
long long c_rows_of_rank(const char* path, unsigned rank, unsigned world_size) {
  gpucache_dataset* dataset = NULL;
  gpucache_dataset* slice = NULL;
  gpucache_host_data* host = NULL;
  long long rows = -1;
  if (gpucache_open(path, &dataset) == 0 &&
      gpucache_for_rank(dataset, rank, world_size, &slice) == 0 &&
      gpucache_to_host(slice, NULL, &host) == 0)
    rows = (long long)gpucache_host_data_rows(host);
  gpucache_host_data_free(host);
  gpucache_dataset_free(slice);
  gpucache_dataset_free(dataset);
  return rows;
}

/* The values of all rows of the sequence (or text) column `column`, summed over its pieces'
 * offsets, or -1 on any error. */
long long c_sequence_values(const char* path, const char* column) {
  gpucache_dataset* dataset = NULL;
  gpucache_host_data* host = NULL;
  gpucache_sequence_piece piece;
  size_t count = 0;
  size_t index;
  long long values = -1;
  if (gpucache_open(path, &dataset) == 0 && gpucache_to_host(dataset, NULL, &host) == 0 &&
      gpucache_host_piece_count(host, column, &count) == 0) {
    values = 0;
    for (index = 0; index < count; ++index) {
      if (gpucache_host_get_sequence_piece(host, column, index, &piece) != 0) {
        values = -1;
        break;
      }
      values += (long long)(piece.offsets[piece.rows] - piece.offsets[0]);
    }
  }
  gpucache_host_data_free(host);
  gpucache_dataset_free(dataset);
  return values;
}

/* The elements of one logical row of selected column `index` (the product of its row shape), or
 * -1 on any error. */
long long c_row_elements(const char* path, size_t index) {
  gpucache_dataset* dataset = NULL;
  gpucache_row_shape shape;
  uint32_t d;
  long long elements = -1;
  if (gpucache_open(path, &dataset) == 0 &&
      gpucache_dataset_column_shape(dataset, index, &shape) == 0) {
    elements = 1;
    for (d = 0; d < shape.row_dims && d < GPUCACHE_MAX_ROW_DIMS; ++d)
      elements *= (long long)shape.row_shape[d];
  }
  gpucache_dataset_free(dataset);
  return elements;
}
