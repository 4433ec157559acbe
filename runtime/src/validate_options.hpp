// validate_options: the checks on what an application passes to a queue:
// its path and options, a worker's options and the scheduling calls.
// Each returns ok or `invalid_argument` naming the first bad field.
// Internal to runtime/.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ergon/options.hpp"
#include "ergon/worker.hpp"

namespace ergon::runtime {

/// Every connection of a queue must see the same database, so `path` must
/// name a file.
status validate_path(const std::string& path);

status validate(const options& opts);

// A peer timeout: 0 (off), or 100 ms to a day.
status validate_peer_timeout(const std::string& field, std::chrono::milliseconds timeout);

status validate(const scheduling_options& s);

/// Retention periods > 0, interval > 0, batch 1 to 100,000, writer share
/// in (0, 1].
status validate(const retention_options& r);

status validate(const worker_options& opts);

/// listen_options' roles: each narrow secret needs the queue's own, keeps
/// its rules and differs from the others; each certificate name is a label
/// with a role. Errors name the field ("listen.worker_secret", ...).
status validate_roles(const listen_options& l);

/// A group or type named in a scheduling call ("" is the group of jobs
/// without one).
status validate_name(const char* field, const std::string& name);

/// The arguments of set_group_weight.
status validate_group_weight(const std::string& group, int32_t weight);

/// The arguments of set_group, set_type and set_worker; `field` is "group",
/// "type" or "worker".
status validate_settings(const char* field, const std::string& name, const settings_change& c);

/// The arguments of pause_group and pause_type; `field` is "group" or "type".
status validate_pause(const char* field, const std::string& name,
                      std::optional<std::chrono::milliseconds> duration);

}  // namespace ergon::runtime
