//===- safetensors.cpp - read and write safetensors files -------*- C++ -*-===//
//
// This file implements safetensors.h: an atomic writer (one locked
// temporary file per target, fsync, rename) and a reader that validates a file
// completely before anyone looks at its tensors. The header is JSON, written
// and parsed with nlohmann::json. The runtime is built without exceptions, so a
// throwing nlohmann call would abort: parsing uses allow_exceptions = false,
// dumping replaces invalid UTF-8, and every value's type is checked before it
// is read.
//
//===----------------------------------------------------------------------===//

#include "runtime/safetensors.h"

#include "runtime/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error                                                                         \
    "safetensors data is little-endian; mpc's runtime writes host memory as is"
#endif

namespace mpcrt {

namespace {

// The safetensors crate rejects larger headers (MAX_HEADER_SIZE).
constexpr uint64_t MAX_HEADER_BYTES = 100000000;

// Element sizes of every dtype the format defines, so that a file holding,
// say, an F64 tensor is still recognised as valid safetensors (and then
// rejected by the checkpoint loader for its dtype, with a clear message).
int64_t safetensors_dtype_size(const std::string &dtype) {
  static const std::pair<const char *, int64_t> sizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto &entry : sizes)
    if (dtype == entry.first)
      return entry.second;
  return 0;
}

// ----------------------------------------------------------------------------
// File helpers

bool write_all(int fd, const void *data, size_t size) {
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; ask for 1 GiB at a time.
    size_t chunk = size < (size_t(1) << 30) ? size : (size_t(1) << 30);
    ssize_t written = ::write(fd, bytes, chunk);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool read_all(int fd, void *data, size_t size) {
  unsigned char *bytes = static_cast<unsigned char *>(data);
  while (size > 0) {
    size_t chunk = size < (size_t(1) << 30) ? size : (size_t(1) << 30);
    ssize_t got = ::read(fd, bytes, chunk);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (got == 0) {
      errno = EIO; // the file shrank while we read it
      return false;
    }
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

/// The directory `path` is in.
std::string directory_of(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// `<path>.tmp`, the one temporary file of saves to `path`, opened and
/// locked (flock) for this save, or -1 with errno set. A save killed midway
/// leaves it behind, and the next save reuses it: never more than one. The
/// lock keeps two saves to one path from writing it together; it goes with
/// its holder, even one killed with -9. The inode is checked after locking:
/// a save that waited may find the file it opened already renamed into
/// place by the one before it, and must not truncate that.
int open_locked_temporary(const std::string &temp) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
      return -1;
    if (::flock(fd, LOCK_EX) != 0) {
      int saved_errno = errno;
      ::close(fd);
      errno = saved_errno;
      return -1;
    }
    struct stat opened, named;
    if (::fstat(fd, &opened) == 0 && ::stat(temp.c_str(), &named) == 0 &&
        opened.st_dev == named.st_dev && opened.st_ino == named.st_ino) {
      if (::ftruncate(fd, 0) == 0)
        return fd;
      int saved_errno = errno;
      ::close(fd);
      errno = saved_errno;
      return -1;
    }
    ::close(fd); // renamed away meanwhile: open the name again
  }
  errno = EBUSY;
  return -1;
}

/// Removes `<name>.tmp.<suffix>` beside `path`: the temporary files of
/// saves by mpc versions that named them at random, which a killed save
/// left behind.
void remove_stale_temporaries(const std::string &path) {
  std::string directory = directory_of(path);
  size_t slash = path.rfind('/');
  std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR *listing = ::opendir(directory.c_str());
  if (!listing)
    return;
  while (const dirent *entry = ::readdir(listing)) {
    std::string name = entry->d_name;
    if (name.size() > prefix.size() &&
        name.compare(0, prefix.size(), prefix) == 0)
      ::unlinkat(::dirfd(listing), name.c_str(), 0);
  }
  ::closedir(listing);
}

// The JSON header, padded with spaces to a multiple of 8 bytes.
std::string
make_header(const std::vector<safetensors_tensor> &tensors,
            const std::vector<uint64_t> &offsets,
            const std::vector<std::pair<std::string, std::string>> &metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto &entry : metadata)
      meta[entry.first] = entry.second;
    header["__metadata__"] = std::move(meta);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = safetensors_dtype(tensors[i].dtype);
    info["shape"] = tensors[i].shape;
    info["data_offsets"] = {offsets[i], offsets[i + 1]};
    header[tensors[i].name] = std::move(info);
  }
  std::string text = header.dump(
      -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

bool as_offset(const nlohmann::json &value, uint64_t *result) {
  if (!value.is_number_unsigned())
    return false;
  *result = value.get<uint64_t>();
  return true;
}

} // namespace

const char *safetensors_dtype(mpc_dtype dtype) {
  switch (dtype) {
  case MPC_F32:
    return "F32";
  case MPC_F16:
    return "F16";
  case MPC_BF16:
    return "BF16";
  case MPC_I32:
    return "I32";
  case MPC_I64:
    return "I64";
  }
  return "?";
}

// ----------------------------------------------------------------------------
// Writer

mpc_status write_safetensors(
    const char *path, const std::vector<safetensors_tensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata) {
  // Tensors tile the data section in order.
  std::vector<uint64_t> offsets(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t elements = 1;
    for (int64_t dim : tensors[i].shape)
      elements *= static_cast<uint64_t>(dim);
    offsets[i + 1] = offsets[i] + elements * mpc_dtype_size(tensors[i].dtype);
  }
  std::string header = make_header(tensors, offsets, metadata);
  unsigned char length[8];
  uint64_t header_size = header.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(header_size >> (8 * i));

  std::string target = path;
  std::string temp = target + ".tmp";
  int fd = open_locked_temporary(temp);
  if (fd < 0)
    return set_error(MPC_ERROR_IO, "cannot write '%s': cannot create '%s': %s",
                     path, temp.c_str(), std::strerror(errno));
  remove_stale_temporaries(target);

  const char *failed_step = nullptr;
  if (!write_all(fd, length, sizeof(length)) ||
      !write_all(fd, header.data(), header.size()))
    failed_step = "write";
  for (size_t i = 0; !failed_step && i < tensors.size(); ++i)
    if (!write_all(fd, tensors[i].data, offsets[i + 1] - offsets[i]))
      failed_step = "write";
  // fsync before rename: otherwise a crash can leave the new name pointing
  // at a file whose data never reached the disk.
  if (!failed_step && ::fsync(fd) != 0)
    failed_step = "fsync";
  int saved_errno = errno;
  // Renamed while still locked: a save waiting for the lock then sees that
  // its file is no longer the temporary one.
  if (!failed_step && ::rename(temp.c_str(), path) != 0) {
    failed_step = "rename";
    saved_errno = errno;
  }
  if (failed_step)
    ::unlink(temp.c_str());
  if (::close(fd) != 0 && !failed_step) {
    failed_step = "close";
    saved_errno = errno;
  }
  if (failed_step) {
    return set_error(MPC_ERROR_IO, "cannot write '%s': %s '%s': %s", path,
                     failed_step, temp.c_str(), std::strerror(saved_errno));
  }
  // Make the rename itself durable. Best effort: some file systems refuse
  // fsync on a directory, and the checkpoint is complete either way.
  int dir_fd = ::open(directory_of(target).c_str(), O_RDONLY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return MPC_OK;
}

// ----------------------------------------------------------------------------
// Reader

mpc_status read_safetensors(const char *path, safetensors_file *file) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer. (It changes nothing for the regular files read below.)
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return set_error(MPC_ERROR_IO, "cannot open '%s': %s", path,
                     std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int saved_errno = errno;
    ::close(fd);
    return set_error(MPC_ERROR_IO, "cannot read '%s': %s", path,
                     std::strerror(saved_errno));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return set_error(MPC_ERROR_IO,
                     "cannot read '%s': not a regular file (a %s)", path,
                     S_ISFIFO(info.st_mode)   ? "FIFO"
                     : S_ISDIR(info.st_mode)  ? "directory"
                     : S_ISCHR(info.st_mode)  ? "character device"
                     : S_ISBLK(info.st_mode)  ? "block device"
                     : S_ISSOCK(info.st_mode) ? "socket"
                                              : "special file");
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  std::unique_ptr<unsigned char, free_deleter> bytes(
      static_cast<unsigned char *>(std::malloc(size > 0 ? size : 1)));
  if (!bytes) {
    ::close(fd);
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "cannot read '%s': no memory for its %llu bytes", path,
                     static_cast<unsigned long long>(size));
  }
  bool ok = read_all(fd, bytes.get(), size);
  int saved_errno = errno;
  ::close(fd);
  if (!ok)
    return set_error(MPC_ERROR_IO, "cannot read '%s': %s", path,
                     std::strerror(saved_errno));

  // Header size.
  if (size < 8)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is not a safetensors file: %llu bytes, too short "
                     "for the 8-byte header size",
                     path, static_cast<unsigned long long>(size));
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i)
    header_size |= static_cast<uint64_t>(bytes.get()[i]) << (8 * i);
  if (header_size > MAX_HEADER_BYTES)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is not a safetensors file: header size %llu is "
                     "over the limit of %llu bytes",
                     path, static_cast<unsigned long long>(header_size),
                     static_cast<unsigned long long>(MAX_HEADER_BYTES));
  if (header_size > size - 8)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is truncated: its header is %llu bytes but only "
                     "%llu follow the size field",
                     path, static_cast<unsigned long long>(header_size),
                     static_cast<unsigned long long>(size - 8));

  // Header JSON.
  const char *text = reinterpret_cast<const char *>(bytes.get() + 8);
  if (header_size == 0 || text[0] != '{')
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is not a safetensors file: the header does not "
                     "start with '{'",
                     path);
  nlohmann::json header =
      nlohmann::json::parse(text, text + header_size, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is not a safetensors file: its header is not a "
                     "valid JSON object",
                     path);

  std::map<std::string, safetensors_entry> tensors;
  std::map<std::string, std::string> metadata;
  bool has_metadata = false;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const nlohmann::json &value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object())
        return set_error(MPC_ERROR_FORMAT,
                         "'%s': __metadata__ is not an object", path);
      for (auto meta = value.begin(); meta != value.end(); ++meta) {
        if (!meta.value().is_string())
          return set_error(MPC_ERROR_FORMAT,
                           "'%s': __metadata__ value '%s' is not a string",
                           path, meta.key().c_str());
        metadata[meta.key()] = meta.value().get_ref<const std::string &>();
      }
      has_metadata = true;
      continue;
    }
    auto dtype = value.is_object() ? value.find("dtype") : value.end();
    auto shape = value.is_object() ? value.find("shape") : value.end();
    auto offsets = value.is_object() ? value.find("data_offsets") : value.end();
    if (!value.is_object() || dtype == value.end() || shape == value.end() ||
        offsets == value.end())
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' needs \"dtype\", \"shape\" and "
                       "\"data_offsets\"",
                       path, name.c_str());
    safetensors_entry entry;
    if (!dtype->is_string() ||
        safetensors_dtype_size(dtype->get_ref<const std::string &>()) == 0)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has an unknown dtype", path,
                       name.c_str());
    entry.dtype = dtype->get_ref<const std::string &>();
    if (!shape->is_array())
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': shape of tensor '%s' is not a list", path,
                       name.c_str());
    // Element count, with every overflow caught: a crafted header must not
    // make end - begin match by wrapping around.
    uint64_t bytes_needed =
        static_cast<uint64_t>(safetensors_dtype_size(entry.dtype));
    for (const auto &dim : *shape) {
      uint64_t extent = 0;
      if (!as_offset(dim, &extent) || extent > uint64_t(INT64_MAX) ||
          __builtin_mul_overflow(bytes_needed, extent, &bytes_needed))
        return set_error(MPC_ERROR_FORMAT,
                         "'%s': shape of tensor '%s' is not a list of sizes "
                         "that fit in memory",
                         path, name.c_str());
      entry.shape.push_back(static_cast<int64_t>(extent));
    }
    if (!offsets->is_array() || offsets->size() != 2 ||
        !as_offset((*offsets)[0], &entry.begin) ||
        !as_offset((*offsets)[1], &entry.end))
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': data_offsets of tensor '%s' is not [begin, end]",
                       path, name.c_str());
    if (entry.end < entry.begin || entry.end - entry.begin != bytes_needed)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has data_offsets [%llu, %llu] but "
                       "its dtype and shape need %llu bytes",
                       path, name.c_str(),
                       static_cast<unsigned long long>(entry.begin),
                       static_cast<unsigned long long>(entry.end),
                       static_cast<unsigned long long>(bytes_needed));
    tensors[name] = std::move(entry);
  }

  // The tensors must tile the data section exactly, as the safetensors
  // crate requires.
  std::vector<std::pair<const std::string *, const safetensors_entry *>> order;
  for (const auto &entry : tensors)
    order.push_back({&entry.first, &entry.second});
  std::sort(order.begin(), order.end(), [](const auto &l, const auto &r) {
    return l.second->begin != r.second->begin
               ? l.second->begin < r.second->begin
               : l.second->end < r.second->end;
  });
  uint64_t data_size = size - 8 - header_size;
  uint64_t position = 0;
  for (const auto &item : order) {
    const safetensors_entry &entry = *item.second;
    if (entry.begin != position)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' starts at byte %llu of the data, "
                       "expected %llu (tensors must not overlap or leave gaps)",
                       path, item.first->c_str(),
                       static_cast<unsigned long long>(entry.begin),
                       static_cast<unsigned long long>(position));
    position = entry.end;
  }
  if (position != data_size)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': the tensors cover %llu bytes of data but the file "
                     "holds %llu (truncated or padded)",
                     path, static_cast<unsigned long long>(position),
                     static_cast<unsigned long long>(data_size));

  file->bytes = std::move(bytes);
  file->size = size;
  file->data_start = 8 + header_size;
  file->tensors = std::move(tensors);
  file->metadata = std::move(metadata);
  file->has_metadata = has_metadata;
  return MPC_OK;
}

} // namespace mpcrt
