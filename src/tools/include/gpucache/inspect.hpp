// `gpucache inspect`: a dataset's (or one shard's) rows, shards, columns, sizes and provenance,
// read from the manifest and the shard headers only, so it takes milliseconds at any size.
#pragma once

#include <string>

namespace gpucache {

struct InspectReport {
  std::string json;  // machine-readable, see docs/cli.md
  std::string text;  // for people
};

InspectReport inspect(const std::string& path);

}  // namespace gpucache
