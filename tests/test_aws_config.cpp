// Credentials, region and endpoint from the environment and the shared AWS files (with a fake
// environment and fake files: nothing of this machine's is read), and which requests are signed.
#include <doctest/doctest.h>

#include <map>

#include "aws_config.hpp"
#include "gpucache/error.hpp"
#include "http_session.hpp"

using namespace gpucache::remote::detail;

namespace {

struct Fake {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  AwsConfig resolve() const {
    return resolve_aws_config(
        [this](const char* name) -> std::optional<std::string> {
          const auto it = env.find(name);
          if (it == env.end() || it->second.empty()) return std::nullopt;
          return it->second;
        },
        [this](const std::string& path) -> std::optional<std::string> {
          const auto it = files.find(path);
          if (it == files.end()) return std::nullopt;
          return it->second;
        });
  }
};

constexpr const char* kCredentials = R"(# comment
[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key=defaultsecret

[work]
AWS_ACCESS_KEY_ID = WORKKEY
aws_secret_access_key = worksecret
aws_session_token = worktoken
)";

constexpr const char* kConfig = R"([default]
region = ap-south-1
[profile work]
region = eu-central-1
endpoint_url = http://127.0.0.1:9000
)";

}  // namespace

TEST_CASE("ini sections: headers, comments, spacing, lowercased keys") {
  const auto work = ini_section(kCredentials, "work");
  CHECK(work.at("aws_access_key_id") == "WORKKEY");
  CHECK(work.at("aws_session_token") == "worktoken");
  CHECK(ini_section(kCredentials, "default").at("aws_secret_access_key") == "defaultsecret");
  CHECK(ini_section(kCredentials, "missing").empty());
}

TEST_CASE("environment variables win over the shared files") {
  Fake fake;
  fake.env = {{"HOME", "/home/u"},
              {"AWS_ACCESS_KEY_ID", "ENVKEY"},
              {"AWS_SECRET_ACCESS_KEY", "envsecret"},
              {"AWS_SESSION_TOKEN", "envtoken"},
              {"AWS_REGION", "us-west-2"},
              {"AWS_ENDPOINT_URL", "http://127.0.0.1:5000"}};
  fake.files = {{"/home/u/.aws/credentials", kCredentials}, {"/home/u/.aws/config", kConfig}};
  const AwsConfig config = fake.resolve();
  CHECK(config.access_key == "ENVKEY");
  CHECK(config.secret_key == "envsecret");
  CHECK(config.session_token == "envtoken");
  CHECK(config.region == "us-west-2");
  CHECK(config.endpoint == "http://127.0.0.1:5000");
  CHECK(config.credentials_from == "environment");
}

TEST_CASE("the shared files give keys, region and endpoint of AWS_PROFILE") {
  Fake fake;
  fake.env = {{"HOME", "/home/u"}, {"AWS_PROFILE", "work"}};
  fake.files = {{"/home/u/.aws/credentials", kCredentials}, {"/home/u/.aws/config", kConfig}};
  const AwsConfig config = fake.resolve();
  CHECK(config.access_key == "WORKKEY");
  CHECK(config.session_token == "worktoken");
  CHECK(config.region == "eu-central-1");
  CHECK(config.endpoint == "http://127.0.0.1:9000");
  CHECK(config.credentials_from.find("[work]") != std::string::npos);

  fake.env = {{"HOME", "/home/u"}};  // the default profile, AWS_DEFAULT_REGION over the file
  fake.env["AWS_DEFAULT_REGION"] = "sa-east-1";
  CHECK(fake.resolve().access_key == "DEFAULTKEY");
  CHECK(fake.resolve().region == "sa-east-1");
  fake.env.erase("AWS_DEFAULT_REGION");
  CHECK(fake.resolve().region == "ap-south-1");

  fake.env["AWS_SHARED_CREDENTIALS_FILE"] = "/elsewhere";
  fake.files["/elsewhere"] = "[default]\naws_access_key_id=OTHER\naws_secret_access_key=s\n";
  CHECK(fake.resolve().access_key == "OTHER");
}

TEST_CASE("no credentials anywhere: unsigned requests in us-east-1") {
  Fake fake;
  fake.env = {{"HOME", "/home/u"}};
  const AwsConfig config = fake.resolve();
  CHECK_FALSE(config.signed_requests());
  CHECK(config.region == "us-east-1");
  CHECK(config.endpoint.empty());
}

TEST_CASE("inconsistent settings are refused naming the variable or file") {
  Fake fake;
  fake.env = {{"AWS_ACCESS_KEY_ID", "K"}};
  CHECK_THROWS_WITH_AS(fake.resolve(), doctest::Contains("AWS_SECRET_ACCESS_KEY"), gpucache::Error);
  fake.env = {{"HOME", "/h"}, {"AWS_PROFILE", "nope"}};
  CHECK_THROWS_WITH_AS(fake.resolve(), doctest::Contains("names profile 'nope'"), gpucache::Error);
  fake.env = {{"AWS_ENDPOINT_URL", "127.0.0.1:9000"}};
  CHECK_THROWS_WITH_AS(fake.resolve(), doctest::Contains("not an http:// or https:// URL"),
                       gpucache::Error);
  fake.env = {{"AWS_REGION", "us-east-1/../x"}};
  CHECK_THROWS_WITH_AS(fake.resolve(), doctest::Contains("not a region name"), gpucache::Error);
  fake.env = {{"HOME", "/h"}};
  fake.files = {{"/h/.aws/credentials", "[default]\naws_access_key_id=K\n"}};
  CHECK_THROWS_WITH_AS(fake.resolve(), doctest::Contains("only one of"), gpucache::Error);
}

TEST_CASE("requests are signed (SigV4) only for S3 with credentials") {
  AwsConfig aws;
  aws.region = "eu-west-3";
  CHECK_FALSE(Signing::for_config(aws, true).sigv4);  // no keys: unsigned (public buckets)
  aws.access_key = "K";
  aws.secret_key = "S";
  aws.session_token = "T";
  const Signing s3 = Signing::for_config(aws, true);
  CHECK(s3.sigv4);
  CHECK(s3.region == "eu-west-3");
  CHECK(s3.access_key == "K");
  CHECK(s3.secret_key == "S");
  CHECK(s3.session_token == "T");
  CHECK_FALSE(Signing::for_config(aws, false).sigv4);  // http(s) datasets are never signed
}
