#pragma once
// POSIX file access for checkpoints, every failure a CheckpointError naming the path and the
// system's reason (disk full, permission, ...).

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::checkpoint::detail {

class File {
 public:
  // Opens for reading. Errors: missing, unreadable.
  static File open_read(const std::string& path);
  // Creates (truncating) for writing.
  static File create(const std::string& path);
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint64_t size() const;
  // Reads exactly n bytes at offset; `what` (e.g. "chunk of \"w\"") names them in the error of
  // a file shorter than offset + n.
  void pread_exact(void* out, size_t n, uint64_t offset, const std::string& what) const;
  std::string pread_string(uint64_t offset, size_t n, const std::string& what) const;
  void write_all(const void* data, size_t n);
  void sync();
  void close();

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

bool path_exists(const std::string& path);
// mkdir -p.
void make_directories(const std::string& dir);
// fsync of a directory, so that the names created and renamed in it are durable.
void sync_directory(const std::string& dir);
void rename_file(const std::string& from, const std::string& to);
void remove_file_if_exists(const std::string& path);

// An exclusive advisory lock on DIR/.tessera_checkpoint.lock (flock: released when the process
// dies, so a killed save leaves no stale lock). Errors: held by another save, in this process or
// another.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir);
  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&&) = delete;
  DirectoryLock(const DirectoryLock&) = delete;
  ~DirectoryLock();

 private:
  int fd_ = -1;
};

}  // namespace tessera::checkpoint::detail
