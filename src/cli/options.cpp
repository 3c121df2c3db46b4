#include "commands.hpp"
#include "gpucache/error.hpp"
#include "gpucache/progress.hpp"

namespace gpucache::cli {

bool show_progress(bool quiet) {
  return !quiet && stderr_is_terminal();
}

}  // namespace gpucache::cli
