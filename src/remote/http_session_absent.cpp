// Stands in for http_session.cpp in a build without libcurl (GPUCACHE_REMOTE=OFF or libcurl not
// found), so a remote path is refused in one line saying how to build it in.
#include "gpucache/error.hpp"
#include "http_session.hpp"

namespace gpucache::remote::detail {

Signing Signing::for_config(const AwsConfig& aws, bool s3) {
  Signing signing;
  signing.sigv4 = s3 && aws.signed_requests();
  return signing;
}

bool http_built() noexcept {
  return false;
}

HttpSession::HttpSession() {
  throw Error("", "",
              "this gpucache was built without remote datasets (s3://, http(s)://): install "
              "libcurl (Debian: apt-get install libcurl4-openssl-dev) and rebuild with "
              "-DGPUCACHE_REMOTE=ON");
}

HttpSession::~HttpSession() = default;

HttpResponse HttpSession::get(const std::string&, const Signing&,
                              std::optional<std::pair<std::uint64_t, std::uint64_t>>,
                              const std::string&, std::uint64_t) {
  return {};
}

HttpResponse HttpSession::put_file(const std::string&, const Signing&, const std::string&,
                                   std::uint64_t) {
  return {};
}

}  // namespace gpucache::remote::detail
