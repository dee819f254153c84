// SPDX-License-Identifier: Apache-2.0
// dcbnl encoding and decoding, byte for byte against the uapi constants; the replies are the
// fixtures of a lossless and a lossy mlx5 port (tests/fixtures/netlink/make_dcb.py).
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "kuberdma/base/files.h"
#include "kuberdma/dcb/dcb_ops.h"
#include "nl_bytes.h"

namespace kuberdma::dcb {
namespace {

using testing::NlBytes;

std::vector<uint8_t> Hex(const std::string& name) {
  auto text = ReadFile(std::string(KUBERDMA_FIXTURES) + "/netlink/" + name);
  REQUIRE(text);
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < text->size() && (*text)[i] != '\n'; i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(text->substr(i, 2), nullptr, 16)));
  }
  return out;
}

TEST_CASE("The IEEE DCB query is RTM_GETDCB with a dcbmsg for DCB_CMD_IEEE_GET and the ifname") {
  dcbmsg d{};
  d.dcb_family = AF_UNSPEC;
  d.cmd = DCB_CMD_IEEE_GET;
  auto want =
      NlBytes(RTM_GETDCB, NLM_F_REQUEST).Raw(&d, sizeof d).Str(DCB_ATTR_IFNAME, "ens1f0np0").Done();
  CHECK(EncodeIeeeGet("ens1f0np0") == want);
  CHECK(RTM_GETDCB == 78);
  CHECK(DCB_CMD_IEEE_GET == 21);
  CHECK(sizeof(ieee_pfc) == 136);
}

TEST_CASE("A lossless port's reply: PFC on priority 3, DSCP trust mapping 26 to 3") {
  auto st = DecodeIeeeGet(Hex("dcb-ieee-lossless.hex"));
  REQUIRE(st);
  CHECK(st->PfcPriorities() == std::vector<int>{3});
  CHECK(st->pfc_cap == 8);
  CHECK(st->TrustsDscp());
  CHECK(st->PriorityOfDscp(26) == 3);
  CHECK(st->PriorityOfDscp(48) == 6);
  CHECK(st->PriorityOfDscp(0) == -1);
  CHECK(st->dcbx == (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE));
}

TEST_CASE("A lossy port's reply: no PFC priority, PCP trust") {
  auto st = DecodeIeeeGet(Hex("dcb-ieee-lossy.hex"));
  REQUIRE(st);
  CHECK(st->PfcPriorities().empty());
  CHECK_FALSE(st->TrustsDscp());
}

TEST_CASE("Truncated or foreign messages are errors, never a crash") {
  auto good = Hex("dcb-ieee-lossless.hex");
  for (size_t n : {size_t{0}, size_t{10}, size_t{19}}) {
    CHECK_FALSE(DecodeIeeeGet(std::span(good.data(), n)));
  }
  auto foreign = good;
  foreign[4] = RTM_NEWLINK;
  CHECK(DecodeIeeeGet(foreign).error().code() == ErrorCode::kInvalidArgument);
  auto bare = NlBytes(RTM_GETDCB, 0).Raw("\0\x15\0\0", 4).Done();
  CHECK_FALSE(DecodeIeeeGet(bare));  // no DCB_ATTR_IEEE
}

}  // namespace
}  // namespace kuberdma::dcb
