// Remote dataset URLs: parsing, refusals, object URLs (virtual-hosted on AWS, path style with an
// endpoint), key encoding and cache folder names.
#include <doctest/doctest.h>

#include "gpucache/error.hpp"
#include "gpucache/remote/remote.hpp"
#include "remote_location.hpp"

using namespace gpucache::remote::detail;

TEST_CASE("s3 URLs give bucket and prefix, trailing slashes dropped") {
  const auto location = parse_location("s3://my-bucket/datasets/emb/");
  CHECK(location.scheme == Scheme::s3);
  CHECK(location.bucket == "my-bucket");
  CHECK(location.prefix == "datasets/emb");
  CHECK(location.url == "s3://my-bucket/datasets/emb");
  const auto root = parse_location("s3://my-bucket");
  CHECK(root.prefix.empty());
  CHECK(root.url == "s3://my-bucket");
}

TEST_CASE("http(s) URLs keep host, port and path") {
  const auto location = parse_location("http://127.0.0.1:8080/data/emb//");
  CHECK(location.scheme == Scheme::http);
  CHECK(location.base == "http://127.0.0.1:8080/data/emb");
  CHECK(parse_location("https://example.org/x").scheme == Scheme::https);
}

TEST_CASE("malformed remote paths are refused with the URL and why") {
  CHECK_THROWS_WITH_AS(parse_location("s3://"), doctest::Contains("no bucket"), gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("s3://Bad_Bucket/x"),
                       doctest::Contains("not a valid S3 bucket"), gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("s3://ab/x"), doctest::Contains("not a valid S3 bucket"),
                       gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("https://host/ds?x=1"), doctest::Contains("query"),
                       gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("s3://bucket/ds/shard-00000.gcs"),
                       doctest::Contains("name the folder"), gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("s3://bucket/a b"), doctest::Contains("spaces"),
                       gpucache::Error);
  CHECK_THROWS_WITH_AS(parse_location("ftp://host/x"),
                       doctest::Contains("not a remote dataset URL"), gpucache::Error);
}

TEST_CASE("is_remote_path recognises exactly the three schemes") {
  CHECK(gpucache::remote::is_remote_path("s3://b/x"));
  CHECK(gpucache::remote::is_remote_path("http://h/x"));
  CHECK(gpucache::remote::is_remote_path("https://h/x"));
  CHECK_FALSE(gpucache::remote::is_remote_path("data/s3://x"));
  CHECK_FALSE(gpucache::remote::is_remote_path("/tmp/data"));
  CHECK_FALSE(gpucache::remote::is_remote_path("S3://b/x"));
}

TEST_CASE("object URLs: virtual-hosted on AWS, path style with an endpoint, keys encoded") {
  AwsConfig aws;
  aws.region = "eu-west-1";
  CHECK(object_url(parse_location("s3://my-bucket/ds"), aws, "manifest.json") ==
        "https://my-bucket.s3.eu-west-1.amazonaws.com/ds/manifest.json");
  CHECK(object_url(parse_location("s3://my-bucket"), aws, "shard-00001.gcs") ==
        "https://my-bucket.s3.eu-west-1.amazonaws.com/shard-00001.gcs");
  aws.endpoint = "http://127.0.0.1:9000/";
  CHECK(object_url(parse_location("s3://my-bucket/ds"), aws, "shard-00000.gcs") ==
        "http://127.0.0.1:9000/my-bucket/ds/shard-00000.gcs");
  CHECK(object_url(parse_location("http://h:1/a"), aws, "manifest.json") ==
        "http://h:1/a/manifest.json");
  CHECK(encode_key("a b/c+d~e_f.g-h") == "a%20b/c%2Bd~e_f.g-h");
  CHECK(encode_key("\xc3\xa9") == "%C3%A9");
}

TEST_CASE("cache folder names are readable, safe and distinct per URL") {
  const auto a = cache_folder_name(parse_location("s3://my-bucket/ds/emb"));
  const auto b = cache_folder_name(parse_location("s3://my-bucket/ds-emb"));
  CHECK(a.rfind("s3-my-bucket-ds-emb-", 0) == 0);
  CHECK(a != b);  // the same readable part, different URLs
  CHECK(a.find('/') == std::string::npos);
  const auto http = cache_folder_name(parse_location("http://127.0.0.1:80/x/../y"));
  CHECK(http.find('/') == std::string::npos);
  CHECK(http.find("..") == std::string::npos);
}
