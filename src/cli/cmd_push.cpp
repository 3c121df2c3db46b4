#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpucache/remote/remote.hpp"

namespace gpucache::cli {

Runner add_push(CLI::App& app) {
  auto* command = app.add_subcommand(
      "push",
      "Put a packed dataset into an S3 bucket or onto an HTTP server (shards first, "
      "manifest last)");
  struct Arguments {
    std::string dataset, url;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("dataset", args->dataset, "Dataset directory (what gpucache pack wrote)")
      ->required();
  command->add_option("url", args->url, "s3://BUCKET/PREFIX or http(s)://HOST/PATH")->required();
  command->add_flag("--json", args->json, "Print the result as JSON");
  command->footer(
      R"(Credentials, region and endpoint come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL and ~/.aws (AWS_PROFILE). Each file is one PUT
(at most 5 GiB: pack with a smaller --shard-size for larger shards); manifest.json goes last, so
readers never see a partial dataset.
Examples:
  gpucache push data/emb s3://my-bucket/datasets/emb
  AWS_ENDPOINT_URL=http://127.0.0.1:9000 gpucache push data/emb s3://local/emb --json)");
  return [args] {
    const auto result = remote::push(args->dataset, args->url);
    if (args->json) {
      const nlohmann::ordered_json json = {{"url", result.url},
                                           {"files", result.files},
                                           {"bytes", result.bytes},
                                           {"requests", result.requests}};
      std::puts(json.dump().c_str());
    } else {
      std::printf("pushed %s to %s: %llu files, %llu bytes\n", args->dataset.c_str(),
                  result.url.c_str(), static_cast<unsigned long long>(result.files),
                  static_cast<unsigned long long>(result.bytes));
    }
    return 0;
  };
}

}  // namespace gpucache::cli
