// Files that hold secrets (a shared secret, a TLS key, a passphrase) must
// be private to their owner, as ssh requires of its keys. Internal to
// runtime/.
#pragma once

#include <string>

#include "ergon/credentials.hpp"

namespace ergon::runtime {

/// ok if `path` may be read by its owner only, or if `access` is any (then
/// a file others may read is named in a warning on stderr). Errors:
/// invalid_argument naming `field` when others may read it; io_error when
/// it can't be looked at.
status check_private_file(const std::string& path, file_access access, const char* field);

/// ok, or invalid_argument ("secret") unless `secret` is at least 32
/// random bytes: 64 or more hex digits, or 43 or more base64 characters.
status validate_secret(const std::string& secret);

}  // namespace ergon::runtime
