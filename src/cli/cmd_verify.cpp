#include <cstdio>

#include "commands.hpp"
#include "gpucache/verify.hpp"

namespace gpucache::cli {

Runner add_verify(CLI::App& app) {
  auto* command =
      app.add_subcommand("verify", "Check every byte of a dataset or shard against its hashes");
  struct Arguments {
    std::string path;
    VerifyOptions options;
    bool json = false, quiet = false;
  };
  auto args = std::make_shared<Arguments>();
  command
      ->add_option("path", args->path,
                   "Dataset directory, shard file, or remote dataset (s3://..., https://...)")
      ->required();
  command->add_option("--cache-dir", args->options.cache_dir,
                      "Remote datasets: the cache folder to fetch into and check (default: "
                      "GPUCACHE_CACHE, else a temporary folder)");
  command->add_option("--threads", args->options.threads, "Hashing threads (default: every core)");
  command->add_flag(
      "--deep", args->options.deep,
      "Also re-check every stored embedding row against the validation rules in the manifest");
  command->add_flag("--json", args->json, "Print the report as JSON");
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  command->footer(
      R"(Exit code 0: intact; 1: corruption found (each problem names the file, column and bytes);
2: the path cannot be read.
Examples:
  gpucache verify data/emb
  gpucache verify data/emb/shard-00003.gcs --threads 8
  gpucache verify data/emb --json | jq .problems
  gpucache verify data/emb --deep
  gpucache verify s3://my-bucket/datasets/emb --cache-dir /local/cache)");
  return [args] {
    args->options.show_progress = show_progress(args->quiet || args->json);
    const auto report = verify(args->path, args->options);
    std::puts((args->json ? report.to_json() : report.to_text()).c_str());
    return report.ok() ? 0 : 1;
  };
}

}  // namespace gpucache::cli
