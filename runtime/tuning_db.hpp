// compile()'s view of the tuning database: an in-process copy of each file, read once and dropped when
// this process stores into it, so a lookup costs a map search and no system call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// The record for this problem, ISA, thread count, this CPU and this library version, if any.
std::optional<TuningRecord> tuned_record(const std::string& path, const std::string& canonical, Isa isa,
                                         int threads);
// Changes whenever an in-process copy is dropped: part of the kernel cache's fast key.
uint64_t tuning_db_generation();

}  // namespace deconvjit::detail
