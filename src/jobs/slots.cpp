#include "jobs/slots.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {

Slot acquire_slot(const std::string& directory, std::int64_t count, const std::function<bool()>& cancelled,
                  const std::function<void()>& on_wait) {
  if (count <= 0) return {};
  util::make_dirs(directory, 0711);
  bool told = false;
  while (true) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string path = directory + "/" + std::to_string(i) + ".lock";
      UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
      if (!fd) throw failure("cannot open the job slot " + path + ": " + util::errno_text(errno));
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return Slot(std::move(fd));
    }
    if (!told && on_wait) on_wait();
    told = true;
    if (cancelled && cancelled()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace mullet::jobs
