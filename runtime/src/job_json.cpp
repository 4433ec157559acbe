#include "job_json.hpp"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>

namespace ergon::runtime {
namespace {

using json = nlohmann::json;

// Standard base64 with padding; empty if `text` is not that.
std::optional<std::string> from_base64(const std::string& text) {
  if (text.size() % 4 != 0)
    return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    bool pad = c == '=' && i + 2 >= text.size() && (i + 1 == text.size() || text.back() == '=');
    if (!std::isalnum(c) && c != '+' && c != '/' && !pad)
      return std::nullopt;
  }
  std::string out(text.size() / 4 * 3, '\0');
  auto n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(text.data()),
                           static_cast<int>(text.size()));
  if (n < 0)
    return std::nullopt;
  size_t padding = text.empty() ? 0 : (text.back() == '=') + (text.size() > 1 && text[text.size() - 2] == '=');
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

class job_reader {
 public:
  job_reader(const json& doc, std::string prefix) : doc_(doc), prefix_(std::move(prefix)) {}

  result<job> read() {
    if (!doc_.is_object())
      return bad("", "must be a JSON object with at least a type");
    job j;
    int payload_forms = 0;
    using reader = std::function<status(const json&, const std::string&)>;
    std::map<std::string, reader> keys{
      {"type", text(j.type)},
      {"name", optional_text(j.name)},
      {"group", optional_text(j.group)},
      {"priority", integer(j.priority)},
      {"weight", integer(j.weight)},
      {"run_at_ms", optional_integer(j.run_at_ms)},
      {"delay_ms", integer(j.delay_ms)},
      {"ttl_ms", optional_integer(j.ttl_ms)},
      {"max_retries", integer(j.max_retries)},
      {"timeout_ms", integer(j.timeout_ms)},
      {"heartbeat_increment_ms", integer(j.heartbeat_increment_ms)},
      {"unique_key", optional_text(j.unique_key)},
      {"unique_hold_ms", integer(j.unique_hold_ms)},
      {"result_ttl_ms", optional_integer(j.result_ttl_ms)},
      {"idempotency_key", optional_text(j.idempotency_key)},
      {"on_duplicate", [&](const json& v, const std::string& key) {
         return choice(v, key, {{"skip", 0}, {"replace", 1}, {"reject", 2}, {"requeue", 3}}, [&](int x) {
           j.on_duplicate = static_cast<unique_policy>(x);
         });
       }},
      {"raise_holder_priority", [&](const json& v, const std::string& key) -> status {
         if (!v.is_boolean())
           return bad(key, "must be true or false");
         j.raise_holder_priority = v.get<bool>();
         return {};
       }},
      {"ttl_from", [&](const json& v, const std::string& key) {
         return choice(v, key, {{"run_at", 0}, {"first_attempt", 1}},
                       [&](int x) { j.ttl_from = static_cast<ttl_start>(x); });
       }},
      {"on_dependency_failure", [&](const json& v, const std::string& key) {
         return choice(v, key, {{"cancel", 0}, {"fail", 1}, {"run", 2}}, [&](int x) {
           j.on_dependency_failure = static_cast<dependency_failure>(x);
         });
       }},
      {"backoff", [&](const json& v, const std::string& key) -> status {
         if (!v.is_object())
           return bad(key, "must be an object (initial_ms, multiplier, randomization, kind, max_ms)");
         auto& b = j.backoff;
         std::map<std::string, reader> fields{
           {"initial_ms", integer(b.initial_ms)},
           {"multiplier", number(b.multiplier)},
           {"randomization", number(b.randomization)},
           {"max_ms", integer(b.max_ms)},
           {"kind", [&](const json& k, const std::string& name) {
              return choice(k, name, {{"exponential", 0}, {"constant", 1}, {"linear", 2}},
                            [&](int x) { b.kind = static_cast<backoff_kind>(x); });
            }}};
         return each(v, key + ".", fields);
       }},
      {"expected_io", [&](const json& v, const std::string& key) -> status {
         if (!v.is_object())
           return bad(key, "must be an object (read_bytes, write_bytes)");
         io_estimate io;
         std::map<std::string, reader> fields{{"read_bytes", integer(io.read_bytes)},
                                              {"write_bytes", integer(io.write_bytes)}};
         auto st = each(v, key + ".", fields);
         if (st)
           j.expected_io = io;
         return st;
       }},
      {"depends_on", [&](const json& v, const std::string& key) -> status {
         if (!v.is_array())
           return bad(key, "must be an array of job ids");
         for (auto& id : v) {
           auto parsed = job_id::parse(id.is_string() ? id.get<std::string>() : std::string{});
           if (!parsed)
             return bad(key, "must be an array of job ids; " + id.dump() + " is not one");
           j.depends_on.push_back(*parsed);
         }
         return {};
       }},
      {"depends_on_batch", [&](const json& v, const std::string& key) -> status {
         if (!v.is_array())
           return bad(key, "must be an array of positions in the batch");
         for (auto& at : v) {
           if (!at.is_number_unsigned() || at.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
             return bad(key, "must be an array of positions in the batch; " + at.dump()
                               + " is not one");
           j.depends_on_batch.push_back(at.get<uint32_t>());
         }
         return {};
       }},
      {"tags", [&](const json& v, const std::string& key) -> status {
         if (!v.is_object())
           return bad(key, "must be an object of strings ({\"tenant\": \"acme\"})");
         for (auto& [k, value] : v.items()) {
           if (!value.is_string())
             return bad(key + "." + k, "must be a string");
           j.tags.emplace(k, value.get<std::string>());
         }
         return {};
       }},
      {"payload", [&](const json& v, const std::string&) -> status {
         ++payload_forms;
         j.payload = to_bytes(json::to_msgpack(v));
         return {};
       }},
      {"payload_base64", [&](const json& v, const std::string& key) -> status {
         ++payload_forms;
         auto bytes = v.is_string() ? from_base64(v.get<std::string>()) : std::nullopt;
         if (!bytes)
           return bad(key, "must be standard base64 (A-Z a-z 0-9 + /, padded with =)");
         j.payload = std::move(*bytes);
         return {};
       }},
      {"payload_text", [&](const json& v, const std::string& key) -> status {
         ++payload_forms;
         if (!v.is_string())
           return bad(key, "must be a string");
         j.payload = v.get<std::string>();
         return {};
       }},
    };
    if (auto st = each(doc_, "", keys); !st)
      return st;
    if (payload_forms > 1)
      return bad("payload", "give one of payload (JSON), payload_base64 and payload_text");
    return j;
  }

 private:
  using reader = std::function<status(const json&, const std::string&)>;

  status bad(const std::string& key, const std::string& why) const {
    auto field = prefix_ + (key.empty() ? std::string{"body"} : key);
    if (key.empty() && !prefix_.empty())
      field = prefix_.substr(0, prefix_.size() - 1);
    return invalid_field(field, why);
  }

  status each(const json& obj, const std::string& at, const std::map<std::string, reader>& keys) {
    for (auto& [k, v] : obj.items()) {
      auto r = keys.find(k);
      if (r == keys.end())
        return bad(at + k, "is not a field of a job");
      if (auto st = r->second(v, at + k); !st)
        return st;
    }
    return {};
  }

  template <class Int>
  reader integer(Int& into) {
    return [this, &into](const json& v, const std::string& key) -> status {
      if (!v.is_number_integer())
        return bad(key, "must be an integer");
      auto x = v.is_number_unsigned() ? static_cast<long double>(v.get<uint64_t>())
                                      : static_cast<long double>(v.get<int64_t>());
      if (x < std::numeric_limits<Int>::min() || x > std::numeric_limits<Int>::max())
        return bad(key, "is out of range: " + v.dump());
      into = static_cast<Int>(v.get<int64_t>());
      return {};
    };
  }

  template <class Int>
  reader optional_integer(std::optional<Int>& into) {
    return [this, &into](const json& v, const std::string& key) {
      Int x{};
      auto st = integer(x)(v, key);
      if (st)
        into = x;
      return st;
    };
  }

  reader number(double& into) {
    return [this, &into](const json& v, const std::string& key) -> status {
      if (!v.is_number())
        return bad(key, "must be a number");
      into = v.get<double>();
      return {};
    };
  }

  reader text(std::string& into) {
    return [this, &into](const json& v, const std::string& key) -> status {
      if (!v.is_string())
        return bad(key, "must be a string");
      into = v.get<std::string>();
      return {};
    };
  }

  reader optional_text(std::optional<std::string>& into) {
    return [this, &into](const json& v, const std::string& key) {
      std::string x;
      auto st = text(x)(v, key);
      if (st)
        into = std::move(x);
      return st;
    };
  }

  status choice(const json& v, const std::string& key, const std::map<std::string, int>& names,
                const std::function<void(int)>& set) {
    auto found = v.is_string() ? names.find(v.get<std::string>()) : names.end();
    if (found == names.end()) {
      std::string all;
      for (auto& [name, x] : names)
        all += (all.empty() ? "" : ", ") + name;
      return bad(key, "must be one of " + all);
    }
    set(found->second);
    return {};
  }

  static std::string to_bytes(const std::vector<uint8_t>& v) {
    return std::string(v.begin(), v.end());
  }

  const json& doc_;
  std::string prefix_;
};

}  // namespace

result<json_submission> jobs_from_json(const std::string& body, size_t max_payload_bytes) {
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return invalid_field("body", "must be a JSON object: one job ({\"type\": ...}) or a batch "
                                 "({\"jobs\": [...]})");
  json_submission out;
  auto checked = [&](const json& one, const std::string& prefix) -> status {
    auto j = job_reader{one, prefix}.read();
    if (!j)
      return j.error();
    if (auto st = validate(*j, max_payload_bytes); !st) {
      // The message names the field; in a batch it names the position too.
      auto what = st.message();
      auto named = "field '" + st.field() + "': ";
      if (what.rfind(named, 0) == 0)
        what = what.substr(named.size());
      return invalid_field(prefix + st.field(), what);
    }
    out.jobs.push_back(std::move(*j));
    return {};
  };
  if (auto batch = doc.find("jobs"); batch != doc.end()) {
    if (doc.size() != 1 || !batch->is_array() || batch->empty())
      return invalid_field("jobs", "a batch is {\"jobs\": [...]} with at least one job and "
                                   "nothing beside it");
    out.batch = true;
    for (size_t i = 0; i < batch->size(); ++i)
      if (auto st = checked((*batch)[i], "jobs[" + std::to_string(i) + "]."); !st)
        return st;
    return out;
  }
  if (auto st = checked(doc, ""); !st)
    return st;
  return out;
}

}  // namespace ergon::runtime
