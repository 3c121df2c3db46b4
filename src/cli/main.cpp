// The gpucache command line: parses arguments with CLI11 and calls the library. Nothing else.
// Exit codes: 0 ok, 1 a problem was found (verify), 2 bad usage or unreadable input.
#include <cstdio>
#include <map>

#include "commands.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gpucache: verified, GPU-ready training datasets"};
  app.set_version_flag("--version", GPUCACHE_VERSION);
  app.require_subcommand(1);
  app.footer("Run 'gpucache COMMAND --help' for a command's options and examples.");
  std::map<std::string, gpucache::cli::Runner> runners{
      {"pack", gpucache::cli::add_pack(app)},       {"verify", gpucache::cli::add_verify(app)},
      {"inspect", gpucache::cli::add_inspect(app)}, {"export", gpucache::cli::add_export(app)},
      {"probe", gpucache::cli::add_probe(app)},     {"merge", gpucache::cli::add_merge(app)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto* subcommand : app.get_subcommands()) return runners.at(subcommand->get_name())();
  } catch (const std::exception& error) {
    // Exactly one line, whatever the message embeds (names from files, paths with line breaks):
    // scripts read the first line of stderr, and a megabyte-long name must not flood a terminal.
    std::fprintf(stderr, "gpucache: error: %s\n", gpucache::detail::one_line(error.what()).c_str());
  }
  return 2;
}
