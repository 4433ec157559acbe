#include "job_filter_sql.hpp"

#include <array>

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage::filter_sql {
namespace {

// Every optional field is a bound parameter that filters only when set. The
// casts give PostgreSQL each parameter's type where it is tested for NULL.
constexpr const char* residual =
  " AND (CAST(?3 AS BIGINT) IS NULL OR status = ?3) AND (CAST(?4 AS TEXT) IS NULL OR type = ?4)"
  " AND (CAST(?5 AS TEXT) IS NULL OR group_key = ?5) AND (CAST(?6 AS TEXT) IS NULL OR name = ?6)"
  " AND (CAST(?7 AS BIGINT) IS NULL OR added_at >= ?7) AND (CAST(?8 AS BIGINT) IS NULL OR added_at < ?8)"
  " AND (CAST(?9 AS BIGINT) IS NULL OR finished_at >= ?9)"
  " AND (CAST(?10 AS BIGINT) IS NULL OR finished_at < ?10)";

// Only in the statements of filters with tags, so the others stay as they
// were.
constexpr const char* tag_residual =
  // Tags: up to max_filter_tags (key, value) pairs, then a key prefix as
  // the range [?21, ?22) of keys, each a lookup in job_tags' primary key.
  " AND (CAST(?13 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM job_tags g"
  " WHERE g.job_id = jobs.id AND g.key = ?13 AND g.value = ?14))"
  " AND (CAST(?15 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM job_tags g"
  " WHERE g.job_id = jobs.id AND g.key = ?15 AND g.value = ?16))"
  " AND (CAST(?17 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM job_tags g"
  " WHERE g.job_id = jobs.id AND g.key = ?17 AND g.value = ?18))"
  " AND (CAST(?19 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM job_tags g"
  " WHERE g.job_id = jobs.id AND g.key = ?19 AND g.value = ?20))"
  " AND (CAST(?21 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM job_tags g"
  " WHERE g.job_id = jobs.id AND g.key >= ?21 AND g.key < ?22))";

static_assert(max_filter_tags == 4, "the residual has four tag slots");

bool is_unsuccessful(job_status s) {
  return s == job_status::failed || s == job_status::cancelled || s == job_status::expired;
}

enum path : size_t { by_tag, by_tag_prefix, by_name, unsuccessful, unfinished, by_row, path_count };

path path_of(const job_filter& f) {
  if (!f.tags.empty())
    return by_tag;
  if (f.name)
    return by_name;
  if (f.tag_prefix)
    return by_tag_prefix;
  if (f.status && is_unsuccessful(*f.status))
    return unsuccessful;
  if (f.status && !is_final(*f.status))
    return unfinished;
  return by_row;
}

std::string build(use u, path p, bool tagged, bool newest_first, engine e) {
  // PostgreSQL plans its own way to the same indexes: it has no INDEXED BY.
  bool sqlite = e == engine::sqlite;
  std::string select = u == use::info ? "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs"
                                      : "SELECT id, external_id FROM jobs";
  // `dead_letter_status = ?3` and `name = ?6` imply their partial index's
  // `IS NOT NULL` by themselves.
  // The row order: the job ids, or for the first tag the index's job_id,
  // so SQLite walks the index in order and stops at the limit.
  std::string order = "id";
  switch (p) {
    case by_tag:
      // The first tag's rows drive (CROSS JOIN keeps SQLite's order); the
      // residual checks that tag again, as one primary-key lookup.
      select = u == use::info ? "SELECT " ERGON_JOB_INFO_COLUMNS : "SELECT id, external_id";
      select += sqlite ? " FROM job_tags t INDEXED BY job_tags_by_value CROSS JOIN jobs"
                       : " FROM job_tags t JOIN jobs";
      select += " ON jobs.id = t.job_id WHERE t.key = ?13 AND t.value = ?14 AND ";
      select += newest_first ? "t.job_id < ?1 AND t.job_id > ?12 AND " : "t.job_id > ?1 AND t.job_id < ?12 AND ";
      order = "t.job_id";
      break;
    case by_tag_prefix:
      // A job may have several keys in the range: the set of its ids.
      select += " WHERE id IN (SELECT job_id FROM job_tags";
      select += sqlite ? " INDEXED BY job_tags_by_value" : "";
      select += " WHERE key >= ?21 AND key < ?22) AND ";
      break;
    case by_name:
      select += sqlite ? " INDEXED BY jobs_by_name" : "";
      select += " WHERE name = ?6 AND ";
      break;
    case unsuccessful:
      select += sqlite ? " INDEXED BY jobs_unsuccessful" : "";
      select += " WHERE dead_letter_status = ?3 AND ";
      break;
    case unfinished: select += " WHERE id >= ?2 AND "; break;
    default: select += " WHERE "; break;
  }
  select += newest_first ? "id < ?1 AND id > ?12" : "id > ?1 AND id < ?12";
  select += residual;
  if (tagged)
    select += tag_residual;
  select += " ORDER BY " + order + (newest_first ? " DESC LIMIT ?11" : " LIMIT ?11");
  if (u == use::removal) {
    // The rows' select, its id alone.
    select.replace(0, select.find(" FROM "), "SELECT id");
    return "DELETE FROM jobs WHERE id IN (" + select + ") RETURNING id, type, status";
  }
  return select;
}

constexpr size_t use_count = 3;
constexpr size_t engine_count = 2;
using table = std::array<std::string, use_count * path_count * 2 * 2 * engine_count>;

size_t slot(use u, path p, bool tagged, bool newest_first, engine e) {
  return (((static_cast<size_t>(u) * path_count + p) * 2 + (tagged ? 1 : 0)) * 2
          + (newest_first ? 1 : 0))
           * engine_count
         + static_cast<size_t>(e);
}

bool is_tagged(const job_filter& f) {
  return !f.tags.empty() || f.tag_prefix.has_value();
}

const table& statements() {
  static const table all = [] {
    table t;
    for (auto u : {use::info, use::rows, use::removal})
      for (size_t p = 0; p < path_count; ++p)
        for (bool tagged : {false, true})
          for (bool desc : {false, true})
            for (auto e : {engine::sqlite, engine::postgres})
              t[slot(u, static_cast<path>(p), tagged, desc, e)] =
                build(u, static_cast<path>(p), tagged, desc, e);
    return t;
  }();
  return all;
}

}  // namespace

const char* select(use u, const job_filter& f, bool newest_first, engine e) {
  return statements()[slot(u, path_of(f), is_tagged(f), newest_first, e)].c_str();
}

void bind(stmt& s, const job_filter& f, range r, int64_t low_mark, int64_t limit) {
  s.bind(1, r.after);
  s.bind(2, low_mark);
  if (f.status)
    s.bind(3, static_cast<int64_t>(*f.status));
  else
    s.bind_null(3);
  s.bind(4, f.type);
  s.bind(5, f.group);
  s.bind(6, f.name);
  s.bind(7, f.submitted_from_ms);
  s.bind(8, f.submitted_before_ms);
  s.bind(9, f.finished_from_ms);
  s.bind(10, f.finished_before_ms);
  s.bind(11, limit);
  s.bind(12, r.far_end);
  if (!is_tagged(f))
    return;  // the statement has no tag parameters
  int slot = 13;
  for (auto& [key, value] : f.tags) {
    s.bind_text(slot++, key);
    s.bind_text(slot++, value);
  }
  for (; slot < 21; ++slot)
    s.bind_null(slot);
  if (f.tag_prefix) {
    s.bind_text(21, *f.tag_prefix);
    s.bind_text(22, prefix_end(*f.tag_prefix));
  } else {
    s.bind_null(21);
    s.bind_null(22);
  }
}

std::string prefix_end(std::string prefix) {
  // The prefix with its last character's code point one higher: UTF-8's
  // byte order is code-point order, so every key that starts with `prefix`
  // sorts before it, and no other key between. Adding one to the last
  // byte would do for ASCII but not for "п" (D0 BF). A last U+10FFFF has
  // no successor: it goes, and the character before it grows.
  while (!prefix.empty()) {
    size_t start = prefix.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(prefix[start]) & 0xC0) == 0x80)
      --start;
    auto lead = static_cast<unsigned char>(prefix[start]);
    size_t n = prefix.size() - start;
    uint32_t cp = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (size_t i = start + 1; i < prefix.size(); ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(prefix[i]) & 0x3F);
    prefix.resize(start);
    if (cp == 0x10FFFF)
      continue;
    cp = cp == 0xD7FF ? 0xE000 : cp + 1;  // surrogates are no characters
    if (cp < 0x80) {
      prefix += static_cast<char>(cp);
    } else if (cp < 0x800) {
      prefix += static_cast<char>(0xC0 | (cp >> 6));
      prefix += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      prefix += static_cast<char>(0xE0 | (cp >> 12));
      prefix += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      prefix += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      prefix += static_cast<char>(0xF0 | (cp >> 18));
      prefix += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      prefix += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      prefix += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return prefix;
  }
  return prefix;  // all U+10FFFF: validate() refuses such a prefix
}

}  // namespace ergon::storage::filter_sql
