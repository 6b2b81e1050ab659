// A thin base over Xbyak::CodeGenerator. Code is assembled into plain read-write memory (never executed
// there) and then copied into a W^X CodeBuffer, so nothing is ever writable and executable at once.
// Generated code is position independent (relative jumps, RIP-relative data only), which lets the bytes
// be copied, dumped and reloaded anywhere.
#pragma once

#include <cstdint>
#include <vector>

#include <xbyak/xbyak.h>

namespace deconvjit::jit {

class Generator : public Xbyak::CodeGenerator {
 public:
  explicit Generator(size_t max_size) : Xbyak::CodeGenerator(max_size, Xbyak::DontSetProtectRWE) {}
  std::vector<uint8_t> bytes() const { return {getCode(), getCode() + getSize()}; }

 protected:
  // SysV: rbx, rbp, r12-r15 are callee-saved; we use rbx and r12-r15.
  void preamble() {
    for (const auto& r : saved_) push(r);
  }
  void postamble() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) pop(*it);
    vzeroupper();
    ret();
  }
  // A counted loop over the valid taps of one axis: `count` loaded from `count_at` (zero or less skips the
  // body), and after each pass the source and weight pointers step by constant byte distances.
  struct TapLoop {
    Xbyak::Reg64 count, src, wei;
    int64_t src_step, wei_step;
  };
  template <typename Body>
  void emit_tap_loop(const TapLoop& t, const Xbyak::Address& count_at, const Xbyak::Reg64& tmp, Body body) {
    Xbyak::Label l_loop, l_done;
    mov(t.count, count_at);
    test(t.count, t.count);
    jle(l_done, T_NEAR);
    L(l_loop);
    body();
    add_imm(t.src, t.src_step, tmp);
    add_imm(t.wei, t.wei_step, tmp);
    dec(t.count);
    jnz(l_loop, T_NEAR);
    L(l_done);
  }

  // add reg, imm for any 64-bit immediate; `tmp` is clobbered only when the value needs 64 bits.
  void add_imm(const Xbyak::Reg64& reg, int64_t v, const Xbyak::Reg64& tmp) {
    if (v == 0) return;
    if (v >= INT32_MIN && v <= INT32_MAX) {
      add(reg, static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      mov(tmp, v);
      add(reg, tmp);
    }
  }

 private:
  const std::vector<Xbyak::Reg64> saved_{rbx, r12, r13, r14, r15};
};

}  // namespace deconvjit::jit
