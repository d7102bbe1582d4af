//===- Output.cpp - Files qgemmc writes: whole, or not at all -------------===//
//
// Every file qgemmc writes (-o of compile and build, bench --out) goes
// through writeOutputs: each target is judged by its type before anything
// is opened (a FIFO would block open() forever, a device would take the
// text or fail half way), the text is written to a temporary file beside
// the target, and only once every text of the command is written are the
// temporaries renamed over their targets. A failure removes the
// temporaries, which this run created, and nothing else: what stood at a
// target before the run is still there, byte for byte.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

using namespace qgemmc;

const char *qgemmc::typeText(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO or pipe";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISREG(mode))
    return "a regular file";
  return "not a regular file";
}

namespace {

void cannotWrite(const std::string &path, const std::string &why) {
  std::cerr << "qgemmc: cannot write " << qgemm::displayPath(path) << ": "
            << why << "\n";
}

/// One output being written: where it goes (a symbolic link's target, so
/// that the link stays) and the temporary that holds it until the rename.
struct Pending {
  std::string shown; ///< The path as the user gave it, for messages.
  std::string target;
  std::string temp;
  mode_t mode = 0;
};

/// The permission bits a new file gets: 0666 less the umask, as open()
/// would have given it (mkstemp creates 0600).
mode_t newFileMode() {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

/// Judges `path` before anything is opened; fills where the text goes.
bool prepare(const std::string &path, Pending &p) {
  p.shown = path;
  p.target = path;
  p.mode = newFileMode();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return true; // a new file
    cannotWrite(path, std::strerror(errno));
    return false;
  }
  if (S_ISLNK(st.st_mode)) {
    // Write where the link points, as opening the path would have.
    char *real = ::realpath(path.c_str(), nullptr);
    if (!real) {
      cannotWrite(path, std::string("it is a symbolic link that cannot be "
                                    "followed (") +
                            std::strerror(errno) + ")");
      return false;
    }
    p.target = real;
    std::free(real);
    if (::stat(p.target.c_str(), &st) != 0) {
      cannotWrite(path, std::strerror(errno));
      return false;
    }
  }
  if (!S_ISREG(st.st_mode)) {
    cannotWrite(path, std::string("it is ") + typeText(st.st_mode) +
                          "; qgemmc writes only regular files, and leaves "
                          "anything else at an output path alone");
    return false;
  }
  p.mode = st.st_mode & 07777; // a replaced file keeps its permissions
  return true;
}

bool writeAll(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return false;
    }
    done += size_t(n);
  }
  return true;
}

/// Writes `text` into a new temporary file beside p.target.
bool writeTemp(Pending &p, const std::string &text) {
  size_t slash = p.target.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : p.target.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? p.target : p.target.substr(slash + 1);
  // Hidden, and marked as qgemmc's: a temporary a crash leaves behind is
  // recognizable, and never mistaken for a kernel.
  std::string tmpl = dir + "." + base.substr(0, 200) + ".qgemmc-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) {
    cannotWrite(p.shown, std::string("cannot create a temporary file "
                                     "beside it: ") +
                             std::strerror(errno));
    return false;
  }
  p.temp = buf.data();
  bool ok = writeAll(fd, text) && ::fchmod(fd, p.mode) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(p.temp.c_str());
    p.temp.clear();
    cannotWrite(p.shown, std::string(std::strerror(err)) +
                             "; it is left as it was");
  }
  return ok;
}

} // namespace

bool qgemmc::writeOutputs(const std::vector<OutputText> &outputs) {
  std::vector<Pending> pending(outputs.size());
  auto discard = [&] {
    for (const Pending &p : pending)
      if (!p.temp.empty())
        ::unlink(p.temp.c_str());
  };
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!prepare(outputs[i].path, pending[i]))
      return false;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!writeTemp(pending[i], outputs[i].text)) {
      discard();
      return false;
    }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (::rename(pending[i].temp.c_str(), pending[i].target.c_str()) != 0) {
      cannotWrite(pending[i].shown, std::strerror(errno));
      discard(); // the temporaries not renamed yet; the renamed are done
      return false;
    }
    pending[i].temp.clear();
  }
  return true;
}
