// The contract every input reader keeps. A reader maps the file, validates it, and hands over
// either the object tree (value.hpp) of a pickle-like or JSON format, with tensors pointing into
// the mapped file wherever the bytes can be used as they are, or, for an array format whose
// arrays it can read row by row without a tree (HDF5, say), the columns themselves
// (input_column.hpp). It throws gpucache::Error naming the file, where in it, and what is wrong.
//
// Each format's reader lives in src/inputs/<name>/ and is declared once, in its own header
// (gpucache/pt.hpp, npy.hpp, npz.hpp, safetensors.hpp, jsonl.hpp, hdf5.hpp, parquet.hpp); the
// registry (input.hpp) holds a pointer to each, of the one type ReadFn.
#pragma once

#include <string>
#include <vector>

#include "gpucache/input_column.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

struct ReadOptions {
  // Threads a reader may run beside the caller's: 0 for one per core, 1 for the caller's only.
  // Readers with nothing to share out ignore it and say why beside their declaration.
  unsigned threads = 0;
  // False when the caller wants the tree and every tensor's dtype and shape but not the tensor
  // data (`gpucache probe`): a reader then does no work that grows with the data. Compressed
  // storages stay compressed (only the bytes that describe them, such as an .npy header, are
  // inflated) and their tensors refuse to be read (Storage::not_read); checks that read every
  // data byte (the CRC-32 of stored zip members) are left to the full read. Text is part of the
  // tree and is always read. Everything else is checked as in a full read.
  bool tensor_data = true;
};

// A field of an input that no column is made of, and why: named by probe, pack's summary and
// --json, and the manifest (`left_out`), so nothing of the user's data goes missing unsaid.
struct LeftOutField {
  std::string field;   // its path or name in the input ("when", "/record", "[*].meta")
  std::string reason;  // "dates, times, ... are not numbers gpucache stores"
  bool operator==(const LeftOutField&) const = default;
};
// "field (reason)", as messages list them.
inline std::string left_out_entry(const LeftOutField& left_out) {
  return left_out.field + " (" + left_out.reason + ")";
}

// What a reader hands over: exactly one of a tree, which schema mapping turns into columns, and
// columns named as --field paths name them (the reader's path of each, e.g. an HDF5 dataset's).
struct InputData {
  Value tree{};
  std::vector<InputColumn> columns{};
  // A layout the reader recognised among the columns (HDF5's ann-benchmarks files): the columns
  // to take when no --field names any, as (column name, path) pairs, and one sentence on why,
  // for probe and the manifest. Empty when the reader has no opinion.
  struct DefaultField {
    std::string column, path;
  };
  std::vector<DefaultField> default_fields{};
  std::string layout_explanation{};
  // Arrays or fields the reader found but cannot make columns of, each with why ("when", "INT96
  // timestamps"). Probe lists them, pack reports them, and --field naming one says why it is
  // missing.
  std::vector<LeftOutField> left_out{};
  bool columnar() const noexcept { return !columns.empty(); }
};

// Every reader has this type, so the registry can hold any of them and call them in one place.
using ReadFn = InputData (*)(const std::string& path, const ReadOptions& options);

// The registry entry of a reader that returns a tree.
template <Value (*Read)(const std::string&, const ReadOptions&)>
InputData read_tree(const std::string& path, const ReadOptions& options) {
  return InputData{.tree = Read(path, options)};
}

}  // namespace gpucache
