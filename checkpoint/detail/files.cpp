#include "tessera/checkpoint/detail/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tessera/checkpoint/checkpoint.h"

namespace tessera::checkpoint::detail {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw CheckpointError("[checkpoint] " + what + " " + path + ": " + std::strerror(err));
}

}  // namespace

File File::open_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path, errno);
  return File(fd, path);
}

File File::create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", path, errno);
  return File(fd, path);
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t File::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("cannot stat", path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

void File::pread_exact(void* out, size_t n, uint64_t offset, const std::string& what) const {
  auto* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("cannot read " + what + " from", path_, errno);
    }
    if (got == 0) {
      throw CheckpointError("[checkpoint] " + path_ + " is truncated: " + what + " needs bytes [" +
                            std::to_string(offset) + ", " + std::to_string(offset + n) +
                            ") but the file has " + std::to_string(size()));
    }
    done += static_cast<size_t>(got);
  }
}

std::string File::pread_string(uint64_t offset, size_t n, const std::string& what) const {
  std::string out(n, '\0');
  pread_exact(out.data(), n, offset, what);
  return out;
}

void File::write_all(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd_, p, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path_, errno);
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
}

void File::sync() {
  if (::fsync(fd_) != 0) fail("cannot fsync", path_, errno);
}

void File::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  // A deferred write error (NFS, a full disk) may first show here.
  if (::close(fd) != 0) fail("cannot close", path_, errno);
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create the directory", dir, ec.value());
  if (!std::filesystem::is_directory(dir, ec)) {
    throw CheckpointError("[checkpoint] " + dir + " exists and is not a directory");
  }
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open the directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("cannot fsync the directory", dir, err);
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("cannot rename " + from + " to", to, errno);
}

void remove_file_if_exists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("cannot remove", path, errno);
}

DirectoryLock::DirectoryLock(const std::string& dir) {
  const std::string path = dir + "/.tessera_checkpoint.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create the lock file", path, errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw CheckpointError("[checkpoint.save] another save into " + dir +
                            " is in progress (it holds " + path +
                            "); concurrent saves to one directory are refused");
    }
    fail("cannot lock", path, err);
  }
}

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace tessera::checkpoint::detail
