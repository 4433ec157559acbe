#include "transport/bounded_reader.hpp"

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/execution_unit.hpp>
#include <caf/message.hpp>
#include <caf/proxy_registry.hpp>

#include <vector>

namespace ergon::transport {
namespace {

// A binary_deserializer (final in CAF 0.17) with a bound on sequences.
class bounded_reader final : public caf::deserializer {
 public:
  bounded_reader(caf::execution_unit* ctx, const char* data, size_t size)
      : caf::deserializer(ctx), inner_(ctx, data, size) {}

  caf::error begin_object(uint16_t& nr, std::string& name) override {
    return inner_.begin_object(nr, name);
  }
  caf::error end_object() override { return inner_.end_object(); }

  caf::error begin_sequence(size_t& size) override {
    if (auto err = inner_.begin_sequence(size))
      return err;
    // Every element of what ergon sends takes at least one byte.
    if (size > inner_.remaining())
      return caf::sec::end_of_stream;
    return caf::none;
  }
  caf::error end_sequence() override { return inner_.end_sequence(); }
  caf::error apply_raw(size_t n, void* data) override { return inner_.apply_raw(n, data); }

 protected:
  caf::error apply_impl(int8_t& x) override { return inner_(x); }
  caf::error apply_impl(uint8_t& x) override { return inner_(x); }
  caf::error apply_impl(int16_t& x) override { return inner_(x); }
  caf::error apply_impl(uint16_t& x) override { return inner_(x); }
  caf::error apply_impl(int32_t& x) override { return inner_(x); }
  caf::error apply_impl(uint32_t& x) override { return inner_(x); }
  caf::error apply_impl(int64_t& x) override { return inner_(x); }
  caf::error apply_impl(uint64_t& x) override { return inner_(x); }
  caf::error apply_impl(float& x) override { return inner_(x); }
  caf::error apply_impl(double& x) override { return inner_(x); }
  caf::error apply_impl(long double& x) override { return inner_(x); }
  caf::error apply_impl(std::string& x) override { return inner_(x); }
  caf::error apply_impl(std::u16string& x) override { return inner_(x); }
  caf::error apply_impl(std::u32string& x) override { return inner_(x); }

 private:
  caf::binary_deserializer inner_;
};

// Actor handles read as nothing: no proxy, no monitor sent to the peer.
class no_proxies final : public caf::proxy_registry::backend {
 public:
  caf::strong_actor_ptr make_proxy(caf::node_id, caf::actor_id) override { return nullptr; }
  void set_last_hop(caf::node_id*) override {}
};

class scan_unit final : public caf::execution_unit {
 public:
  scan_unit(caf::actor_system& sys, caf::proxy_registry& proxies) : execution_unit(&sys) {
    proxy_registry_ptr(&proxies);
  }
  void exec_later(caf::resumable*) override {}
};

}  // namespace

std::string check_payload_bytes(caf::actor_system& sys, payload_kind kind, const char* data,
                          size_t size) {
  no_proxies backend;
  caf::proxy_registry proxies{sys, backend};
  scan_unit unit{sys, proxies};
  bounded_reader source{&unit, data, size};
  // One element at a time: CAF 0.17.6's variadic operator() drops the
  // error of a message that fails to read (measured with g++ 12, C++17).
  caf::error err;
  caf::node_id from;
  caf::node_id to;
  switch (kind) {
    case payload_kind::direct_message: {
      std::vector<caf::strong_actor_ptr> stages;
      caf::message msg;
      err = source.apply(stages);
      if (!err)
        err = inspect(source, msg);
      if (!err && msg.match_elements<caf::atom_value, caf::strong_actor_ptr>()) {
        auto what = msg.get_as<caf::atom_value>(0);
        if (what == caf::link_atom::value || what == caf::unlink_atom::value)
          return "a remote link request: ergon links no remote actor";
      }
      break;
    }
    case payload_kind::monitor_message:
      err = inspect(source, from);
      if (!err)
        err = inspect(source, to);
      break;
    case payload_kind::down_message: {
      caf::error reason;
      err = inspect(source, from);
      if (!err)
        err = inspect(source, to);
      if (!err)
        err = inspect(source, reason);
      break;
    }
  }
  if (!err)
    return {};
  return "a payload that does not read as a message, or holds a sequence longer than the "
         "bytes left (" + sys.render(err) + ")";
}

}  // namespace ergon::transport
