// SPDX-License-Identifier: Apache-2.0
// A tiny netlink message writer for tests, independent of libnl: expected bytes are spelled out
// from the kernel's uapi layout (struct nlmsghdr, struct nlattr, NLA_ALIGN) and constants.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kuberdma::testing {

class NlBytes {
 public:
  NlBytes(uint16_t type, uint16_t flags) {
    Put32(0);  // nlmsg_len, patched by Done()
    Put16(type);
    Put16(flags);
    Put32(0);  // nlmsg_seq
    Put32(0);  // nlmsg_pid
  }
  NlBytes& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    Pad();
    return *this;
  }
  NlBytes& U32(uint16_t type, uint32_t v) { return Attr(type, &v, 4); }
  NlBytes& U64(uint16_t type, uint64_t v) { return Attr(type, &v, 8); }
  NlBytes& U8(uint16_t type, uint8_t v) { return Attr(type, &v, 1); }
  NlBytes& U16(uint16_t type, uint16_t v) { return Attr(type, &v, 2); }
  NlBytes& Str(uint16_t type, const std::string& s) { return Attr(type, s.c_str(), s.size() + 1); }
  NlBytes& Bytes(uint16_t type, const std::vector<uint8_t>& b) {
    return Attr(type, b.data(), b.size());
  }
  // An attribute whose payload is a uapi struct (struct ifla_vf_mac, ...), as it lies in memory.
  template <typename T>
  NlBytes& Struct(uint16_t type, const T& v) {
    return Attr(type, &v, sizeof v);
  }
  // A nested attribute (flagged NLA_F_NESTED, as libnl's nla_nest_start does) up to End().
  NlBytes& Begin(uint16_t type) {
    open_.push_back(bytes_.size());
    Put16(0);
    Put16(static_cast<uint16_t>(type | NLA_F_NESTED));
    return *this;
  }
  NlBytes& End() {
    auto len = static_cast<uint16_t>(bytes_.size() - open_.back());
    std::memcpy(bytes_.data() + open_.back(), &len, 2);
    open_.pop_back();
    return *this;
  }
  std::vector<uint8_t> Done() {
    auto len = static_cast<uint32_t>(bytes_.size());
    std::memcpy(bytes_.data(), &len, 4);
    return bytes_;
  }

 private:
  NlBytes& Attr(uint16_t type, const void* p, size_t n) {
    Put16(static_cast<uint16_t>(4 + n));  // NLA_HDRLEN: sizeof(struct nlattr), aligned
    Put16(type);
    return Raw(p, n);
  }
  void Put16(uint16_t v) { Raw2(&v, 2); }
  void Put32(uint32_t v) { Raw2(&v, 4); }
  void Raw2(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void Pad() {
    while (bytes_.size() % NLA_ALIGNTO != 0) bytes_.push_back(0);
  }
  std::vector<uint8_t> bytes_;
  std::vector<size_t> open_;
};

}  // namespace kuberdma::testing
