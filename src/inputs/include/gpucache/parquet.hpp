// Reading Parquet files natively (pyarrow, Hugging Face datasets, Spark, DuckDB and Polars write
// them): no Python, no Arrow library. Built when libsnappy was found (src/inputs/CMakeLists.txt);
// the registry refuses .parquet files with one line otherwise.
#pragma once

#include <string>

#include "gpucache/readers.hpp"

namespace gpucache {

// One column per top-level field: numbers (tensor, row shape []), lists of numbers (a tensor
// [rows, n] when every row holds n values, nested fixed-size lists [rows, n, m, ...], else a
// sequence), strings (text). Fields of other types (structs, maps, timestamps, decimals,
// binaries) are left out and named when nothing else is usable or when --field asks for one. A
// null anywhere in a column read is an error naming the row. Every column chunk is decoded on up
// to `options.threads` threads when the file is opened, into memory this reader owns (the size
// of the decoded columns). See src/inputs/parquet/FORMAT.md.
InputData read_parquet(const std::string& path, const ReadOptions& options = {});

}  // namespace gpucache
