#include "bootstrap/job_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/unique_id.h"

namespace fairway {
namespace {

// Larger files are not secrets someone wrote for this purpose.
constexpr size_t kMaxSecretFileBytes = 4096;

Status fileError(const std::string& path, const std::string& why) {
  return Status(fwInvalidArgument, "FAIRWAY_JOB_SECRET_FILE=" + path + " " + why);
}

Status readSecretFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fileError(path, std::string("cannot be opened: ") + std::strerror(errno));
  struct stat st {};
  Status status;
  if (fstat(fd, &st) != 0) {
    status = fileError(path, std::string("cannot be examined: ") + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = fileError(path, "is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
    status = fileError(path, std::string("may be read or written by other users (mode ") + mode +
                                 "): chmod 600 it, or anyone who reads it can join the job");
  } else if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kMaxSecretFileBytes) {
    status = fileError(path, "must hold 1 to " + std::to_string(kMaxSecretFileBytes) + " bytes, not " +
                                 std::to_string(st.st_size));
  }
  std::string text;
  if (status.isOk()) {
    text.resize(static_cast<size_t>(st.st_size));
    size_t filled = 0;
    while (filled < text.size()) {
      ssize_t n = ::read(fd, &text[filled], text.size() - filled);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      filled += static_cast<size_t>(n);
    }
    text.resize(filled);
    // A trailing newline from an editor or echo is not part of the secret.
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.empty()) status = fileError(path, "holds no secret");
  }
  ::close(fd);
  if (status.isOk()) *out = std::move(text);
  return status;
}

}  // namespace

Status readJobSecret(const Config& config, const std::string& publicValues, JobSecret* out) {
  *out = JobSecret{};
  std::string text;
  if (!config.jobSecret.empty()) {
    text = config.jobSecret;
    out->source = "FAIRWAY_JOB_SECRET";
  } else if (!config.jobSecretFile.empty()) {
    FW_RETURN_IF_ERROR(readSecretFile(config.jobSecretFile, &text));
    out->source = "FAIRWAY_JOB_SECRET_FILE=" + config.jobSecretFile;
  } else {
    text = publicValues;
    out->source = "public values (" + publicValues + ")";
    out->isPublic = true;
  }
  secretFromText(text, out->bytes);
  return Status::ok();
}

}  // namespace fairway
