#include "common/sealed_box.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/secrets.h"

namespace allot {

namespace {

constexpr std::string_view kPrefix = "v1.";

Status fileError(const std::string& what, const std::string& path) {
  return Status::FailedPrecondition(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::string newSealKey() {
  std::string key(kSealKeyBytes, '\0');
  randombytes_buf(key.data(), key.size());
  return key;
}

std::string seal(std::string_view key, std::string_view plain) {
  std::vector<unsigned char> box(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES +
                                 plain.size());
  unsigned char* nonce = box.data();
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(box.data() + crypto_secretbox_NONCEBYTES,
                        reinterpret_cast<const unsigned char*>(plain.data()), plain.size(), nonce,
                        reinterpret_cast<const unsigned char*>(key.data()));
  return std::string(kPrefix) +
         toBase64(std::string_view(reinterpret_cast<const char*>(box.data()), box.size()));
}

Result<std::string> unseal(std::string_view key, std::string_view sealed) {
  const auto refused = Status::InvalidArgument(
      "a sealed secret does not open with this key (was allotd's seal.key replaced?)");
  if (key.size() != kSealKeyBytes || sealed.substr(0, kPrefix.size()) != kPrefix) return refused;
  sealed.remove_prefix(kPrefix.size());
  std::vector<unsigned char> box(sealed.size());
  size_t len = 0;
  if (sodium_base642bin(box.data(), box.size(), sealed.data(), sealed.size(), nullptr, &len,
                        nullptr, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      len < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
    return refused;
  std::string plain(len - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()),
                                 box.data() + crypto_secretbox_NONCEBYTES,
                                 len - crypto_secretbox_NONCEBYTES, box.data(),
                                 reinterpret_cast<const unsigned char*>(key.data())) != 0)
    return refused;
  return plain;
}

Result<std::string> loadOrCreateSealKey(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return fileError("cannot create the seal key", path);
    const std::string key = newSealKey();
    const bool written =
        ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
      ::unlink(path.c_str());
      return fileError("cannot write the seal key", path);
    }
    return key;
  }
  if (fd < 0) return fileError("cannot open the seal key", path);
  struct stat st {};
  std::string key(kSealKeyBytes + 1, '\0');
  const ssize_t n = ::fstat(fd, &st) == 0 ? ::read(fd, key.data(), key.size()) : -1;
  ::close(fd);
  if (!S_ISREG(st.st_mode) || n != static_cast<ssize_t>(kSealKeyBytes))
    return Status::FailedPrecondition("the seal key " + path + " is not a file of " +
                                      std::to_string(kSealKeyBytes) + " bytes");
  if (st.st_mode & 077)
    return Status::FailedPrecondition("the seal key " + path +
                                      " may be read by others than its owner: chmod 600 it");
  key.resize(kSealKeyBytes);
  return key;
}

}  // namespace allot
