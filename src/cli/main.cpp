// The gpucache command line: parses arguments with CLI11 and calls the library. Nothing else.
// Exit codes: 0 ok, 1 a problem was found (verify), 2 bad usage or unreadable input.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "gpucache/common/atomic_file.hpp"
#include "gpucache/common/error_text.hpp"
#include "gpucache/error.hpp"

namespace {

// With --json a script reads stdout: a failure is a JSON object there too, besides the line on
// stderr that people read.
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

int fail(bool json, const std::string& message, const gpucache::Error* error = nullptr) {
  // Exactly one line, whatever the message embeds (names from files, paths with line breaks):
  // scripts read the first line of stderr, and a megabyte-long name must not flood a terminal.
  std::fprintf(stderr, "gpucache: error: %s\n", gpucache::detail::one_line(message).c_str());
  if (json) {
    nlohmann::ordered_json out{{"ok", false}, {"error", message}, {"exit_code", 2}};
    if (error) {
      out["file"] = error->file();
      out["location"] = error->location();
      out["cause"] = error->cause();
    }
    std::puts(out.dump(2).c_str());
  }
  return 2;
}

}  // namespace

// SIGINT, SIGTERM, SIGHUP (Ctrl-C, timeout, a closed terminal): remove the temporaries of files
// being written, then die of the signal as before (the shell sees the same status).
extern "C" void remove_temporaries_and_die(int signal) {
  gpucache::detail::remove_temporary_files();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

int main(int argc, char** argv) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP})
    std::signal(signal, remove_temporaries_and_die);
  CLI::App app{"gpucache: verified, GPU-ready training datasets"};
  app.set_version_flag("--version", GPUCACHE_VERSION);
  app.require_subcommand(1);
  app.footer("Run 'gpucache COMMAND --help' for a command's options and examples.");
  std::map<std::string, gpucache::cli::Runner> runners{
      {"pack", gpucache::cli::add_pack(app)},       {"verify", gpucache::cli::add_verify(app)},
      {"inspect", gpucache::cli::add_inspect(app)}, {"export", gpucache::cli::add_export(app)},
      {"probe", gpucache::cli::add_probe(app)},     {"merge", gpucache::cli::add_merge(app)},
      {"push", gpucache::cli::add_push(app)},
  };
  const bool json = wants_json(argc, argv);
  // CLI11 would take an unknown first word for a stray argument ("A subcommand is required"), or
  // show the main help for `gpucache merge --help`: name it and list the real ones instead.
  if (argc > 1 && argv[1][0] != '-' && runners.count(argv[1]) == 0) {
    std::string names;
    for (const auto& [name, runner] : runners) names += (names.empty() ? "" : ", ") + name;
    return fail(json, std::string("unknown command '") + argv[1] + "'; the commands are " + names +
                          " (gpucache --help)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    if (json) return fail(json, error.what());
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto* subcommand : app.get_subcommands()) return runners.at(subcommand->get_name())();
  } catch (const gpucache::Error& error) {
    return fail(json, error.what(), &error);
  } catch (const std::exception& error) {
    return fail(json, error.what());
  }
  return 2;
}
