// SPDX-License-Identifier: Apache-2.0
// ScopeGuard: runs a callback when it leaves scope unless Cancel() was called first.
//
// The "undo only on failure" idiom of every mutating verb:
//
//   MoveIntoPod(...);
//   ScopeGuard undo([&] { MoveBackToHost(...); });
//   KUBERDMA_TRY(SetMtu(...));   // on failure, `undo` runs as we return
//   undo.Cancel();               // success: keep the change
#pragma once

#include <utility>

namespace kuberdma {

template <typename F>
class ScopeGuard {
 public:
  explicit ScopeGuard(F fn) : fn_(std::move(fn)) {}
  ScopeGuard(ScopeGuard&& other) noexcept : fn_(std::move(other.fn_)), active_(other.active_) {
    other.active_ = false;
  }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
  ScopeGuard& operator=(ScopeGuard&&) = delete;
  ~ScopeGuard() {
    if (active_) fn_();
  }

  // Disarms the guard: the callback will not run.
  void Cancel() { active_ = false; }

 private:
  F fn_;
  bool active_ = true;
};

}  // namespace kuberdma
