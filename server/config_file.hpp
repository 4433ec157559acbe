// config_file: ergon-server's configuration file, in TOML (read with
// toml++), and the settings that it and the flags make. Every key mirrors
// an ergon::options field; docs/operations.md, "ergon-server's
// configuration file", lists them. Durations are strings with their unit
// ("30s"); an unknown key, a value of the wrong type or out of range is an
// error that names the file, the line and the key.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include <ergon/credentials.hpp>
#include <ergon/error.hpp>
#include <ergon/options.hpp>

namespace ergon::server {

/// Everything ergon-server runs with.
struct server_settings {
  std::string db;
  /// The queue's options; `listen` is always set, `http` when configured.
  ergon::options opts;
  std::string secret_file;
  /// Secrets of the narrower roles (listen_options::worker_secret, client_secret).
  std::string worker_secret_file;
  std::string client_secret_file;
  std::string passphrase_file;
  /// TLS on the queue's port (empty certificate: none).
  tls_options tls;
  std::chrono::milliseconds peer_timeout{0};
  size_t max_message_bytes = default_message_limit;
  bool allow_open_files = false;
  bool standby = false;
  std::chrono::milliseconds standby_poll{200};

  server_settings();
};

/// Where a configuration file set each option field, to name the line of a
/// value that a later check (ergon::validate) refuses.
struct config_source {
  std::string path;
  /// The option field as ergon's errors name it -> (the file's key, line).
  std::map<std::string, std::pair<std::string, int64_t>> fields;

  /// `st` as "PATH:LINE: KEY: message" when the file set the field it
  /// names, or as it is otherwise.
  std::string explain(const status& st) const;
};

/// Reads the file at `path` over `into`: the keys it has replace into's
/// values. Errors: invalid_argument "PATH:LINE: KEY: why" (a TOML syntax
/// error, an unknown key, a value of the wrong type or out of range),
/// not_found or io_error (the file can't be read).
result<config_source> read_config(const std::string& path, server_settings& into);

}  // namespace ergon::server
