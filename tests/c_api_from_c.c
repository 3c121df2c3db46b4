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
