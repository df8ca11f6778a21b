// A cap on how many jobs run at once in one repository ([run] max_parallel):
// each running job holds an flock on one of N slot files, so a job whose
// runner dies frees its slot with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/fd.hpp"

namespace mullet::jobs {

class Slot {
 public:
  Slot() = default;
  explicit Slot(UniqueFd fd) : m_fd(std::move(fd)) {}
  bool held() const { return static_cast<bool>(m_fd); }

 private:
  UniqueFd m_fd;  // closing it releases the lock
};

// Waits until one of `count` slots under `directory` is free and takes it;
// `cancelled` is asked while waiting (an empty Slot comes back when it says
// yes). count <= 0: no cap.
Slot acquire_slot(const std::string& directory, std::int64_t count, const std::function<bool()>& cancelled,
                  const std::function<void()>& on_wait = {});

}  // namespace mullet::jobs
