// SPDX-License-Identifier: Apache-2.0
// The control channel two pods' probe modules meet over (the verbs, UCX and MPI-free probes): one
// TCP connection, rank 0 (the server) listening, rank 1 (the client) connecting with retries;
// newline-delimited lines each way. Linked into each module that needs it (through kuberdma::sock).
//
//   Control ctl;
//   KUBERDMA_TRY(ctl.Open(/*server=*/rank == 0, "10.0.0.1:29510", 60));
//   ctl.Send(address_hex);
//   std::string theirs;
//   if (!ctl.Receive(&theirs, 60)) ...
#pragma once

#include <functional>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::validator {

class Control {
 public:
  // kInvalidArgument for a peer that is not host:port, kTimeout when no connection is made
  // within `timeout_s`, the listen's error for the server.
  Result<void> Open(bool server, const std::string& peer, int timeout_s);
  // One line (without its newline); false when the peer is gone.
  bool Send(const std::string& line);
  // The next line; false on timeout or when the peer is gone.
  bool Receive(std::string* line, int timeout_s);
  // The same, calling `between` every millisecond while no line is there: a library that must
  // progress its own engine to answer the peer (UCX's worker completes a wireup only when
  // progressed) keeps doing so while it waits.
  bool Receive(std::string* line, int timeout_s, const std::function<void()>& between);

 private:
  UniqueFd fd_;
  std::string pending_;
};

}  // namespace kuberdma::validator
