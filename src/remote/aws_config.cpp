#include "aws_config.hpp"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpucache/error.hpp"

namespace gpucache::remote::detail {
namespace {

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return std::string(text);
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

FileLookup real_files() {
  return [](const std::string& path) -> std::optional<std::string> {
    std::ifstream file(path, std::ios::binary);
    if (!file) return std::nullopt;
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
  };
}

std::map<std::string, std::string> ini_section(std::string_view text, std::string_view section) {
  std::map<std::string, std::string> values;
  bool inside = false;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    std::string line = trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(std::string_view(line).substr(1, line.size() - 2)) == section;
      continue;
    }
    const std::size_t equals = line.find('=');
    if (!inside || equals == std::string::npos) continue;
    values[lower(trim(std::string_view(line).substr(0, equals)))] =
        trim(std::string_view(line).substr(equals + 1));
  }
  return values;
}

AwsConfig resolve_aws_config(const EnvLookup& env, const FileLookup& files) {
  AwsConfig config;
  const std::string profile = env("AWS_PROFILE").value_or("default");
  const std::string home = env("HOME").value_or("");
  const std::string credentials_path =
      env("AWS_SHARED_CREDENTIALS_FILE").value_or(home.empty() ? "" : home + "/.aws/credentials");
  const std::string config_path =
      env("AWS_CONFIG_FILE").value_or(home.empty() ? "" : home + "/.aws/config");
  const auto credentials_text = credentials_path.empty() ? std::nullopt : files(credentials_path);
  const auto config_text = config_path.empty() ? std::nullopt : files(config_path);
  const auto from_credentials = credentials_text ? ini_section(*credentials_text, profile)
                                                 : std::map<std::string, std::string>{};
  // ~/.aws/config names sections "[profile NAME]", except the default one.
  const auto from_config =
      config_text ? ini_section(*config_text, profile == "default" ? std::string("default")
                                                                   : "profile " + profile)
                  : std::map<std::string, std::string>{};

  const auto key = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (key || secret) {
    if (!key || !secret)
      throw Error(key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID", "",
                  std::string("is not set but ") +
                      (key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                      " is: set both, or neither to use the shared credentials file");
    config.access_key = *key;
    config.secret_key = *secret;
    config.session_token = env("AWS_SESSION_TOKEN").value_or("");
    config.credentials_from = "environment";
  } else {
    const auto find = [](const std::map<std::string, std::string>& values, const char* name) {
      const auto it = values.find(name);
      return it == values.end() ? std::string() : it->second;
    };
    std::string found_key = find(from_credentials, "aws_access_key_id");
    std::string found_secret = find(from_credentials, "aws_secret_access_key");
    std::string token = find(from_credentials, "aws_session_token");
    std::string source = credentials_path + " [" + profile + "]";
    if (found_key.empty() && found_secret.empty()) {  // keys may also live in the config file
      found_key = find(from_config, "aws_access_key_id");
      found_secret = find(from_config, "aws_secret_access_key");
      token = find(from_config, "aws_session_token");
      source = config_path + " [" + profile + "]";
    }
    if (found_key.empty() != found_secret.empty())
      throw Error(source, "", "has only one of aws_access_key_id and aws_secret_access_key");
    if (!found_key.empty()) {
      config.access_key = found_key;
      config.secret_key = found_secret;
      config.session_token = token;
      config.credentials_from = source;
    } else if (env("AWS_PROFILE") && from_credentials.empty() && from_config.empty()) {
      throw Error("AWS_PROFILE", "",
                  "names profile '" + profile + "', which neither " + credentials_path + " nor " +
                      config_path + " has");
    }
  }
  if (const auto region = env("AWS_REGION")) {
    config.region = *region;
  } else if (const auto fallback = env("AWS_DEFAULT_REGION")) {
    config.region = *fallback;
  } else if (const auto it = from_config.find("region");
             it != from_config.end() && !it->second.empty()) {
    config.region = it->second;
  }
  for (const char c : config.region)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
      throw Error("AWS_REGION", "", "'" + config.region + "' is not a region name");
  if (const auto endpoint =
          env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3") : env("AWS_ENDPOINT_URL")) {
    if (endpoint->rfind("http://", 0) != 0 && endpoint->rfind("https://", 0) != 0)
      throw Error("AWS_ENDPOINT_URL", "", "'" + *endpoint + "' is not an http:// or https:// URL");
    config.endpoint = *endpoint;
  } else if (const auto it = from_config.find("endpoint_url"); it != from_config.end()) {
    config.endpoint = it->second;
  }
  return config;
}

}  // namespace gpucache::remote::detail
