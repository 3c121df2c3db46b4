// The gpucache command line: parses arguments with CLI11 and calls the library. Nothing else.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "gpucache/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gpucache: verified, GPU-ready embedding datasets"};
  app.set_version_flag("--version", GPUCACHE_VERSION);
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  return 0;
}
