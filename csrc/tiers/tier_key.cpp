#include "kvtier/tiers/tier_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

#if KVTIER_WITH_OPENSSL
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#endif

namespace kvtier::tiers {
namespace {

constexpr std::size_t kMaxKeyFileBytes = 4096;
constexpr char kIdText[] = "kvtier tier key id v1";

/// The key file's bytes, read through one descriptor that is checked first.
std::vector<std::byte> read_key_file(const std::filesystem::path& path) {
  const auto bad = [&](const std::string& why) { return ConfigError("tier key file " + path.string() + ": " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw bad(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw bad(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw bad("not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw bad(std::string("readable or writable by group or others (mode ") + mode + "): chmod 600 it");
  }
  if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    throw bad("over " + std::to_string(kMaxKeyFileBytes) + " bytes: a key is 32 to 4096 bytes of secret");
  }
  std::vector<std::byte> bytes(kMaxKeyFileBytes + 1);
  std::size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw bad(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    if (got > kMaxKeyFileBytes) throw bad("over 4096 bytes: a key is 32 to 4096 bytes of secret");
  }
  while (got > 0 && std::isspace(static_cast<unsigned char>(bytes[got - 1])) != 0) --got;
  bytes.resize(got);
  if (got < TierKey::kMinSecretBytes) {
    throw bad("holds " + std::to_string(got) + " bytes of secret, fewer than " +
              std::to_string(TierKey::kMinSecretBytes) + " (make one: head -c 32 /dev/urandom | xxd -p -c 64 > FILE)");
  }
  return bytes;
}

}  // namespace

#if KVTIER_WITH_OPENSSL

struct TierKey::State {
  EVP_MAC* algorithm = nullptr;
  EVP_MAC_CTX* keyed = nullptr;  // initialized with the key: each MAC starts from a copy
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(algorithm);
  }
};

namespace {

[[noreturn]] void openssl_failed(const char* what) { throw ConfigError(std::string("OpenSSL: ") + what + " failed"); }

}  // namespace

bool tier_keys_available() noexcept { return true; }

TierKey TierKey::from_secret(std::span<const std::byte> secret) {
  if (secret.size() < kMinSecretBytes) {
    throw ConfigError("a tier key needs at least " + std::to_string(kMinSecretBytes) + " bytes of secret, not " +
                      std::to_string(secret.size()));
  }
  auto state = std::make_shared<State>();
  state->algorithm = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (state->algorithm == nullptr) openssl_failed("fetching HMAC");
  state->keyed = EVP_MAC_CTX_new(state->algorithm);
  if (state->keyed == nullptr) openssl_failed("making an HMAC context");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(state->keyed, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), params) != 1) {
    openssl_failed("keying HMAC-SHA256");
  }
  return TierKey(std::move(state));
}

TierKey::Mac TierKey::mac(std::span<const std::byte> first, std::span<const std::byte> second) const {
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_dup(state_->keyed), &EVP_MAC_CTX_free);
  if (!ctx) openssl_failed("copying the HMAC context");
  Mac out{};
  std::size_t written = 0;
  if (EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(first.data()), first.size()) != 1 ||
      EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(second.data()), second.size()) != 1 ||
      EVP_MAC_final(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &written, out.size()) != 1 ||
      written != out.size()) {
    openssl_failed("computing HMAC-SHA256");
  }
  return out;
}

bool same_mac(const TierKey::Mac& a, const TierKey::Mac& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

#else

struct TierKey::State {};

bool tier_keys_available() noexcept { return false; }

TierKey TierKey::from_secret(std::span<const std::byte>) {
  throw ConfigError("this kvtier was built without OpenSSL: no tier key (scripts/install-deps.sh installs libssl-dev)");
}

TierKey::Mac TierKey::mac(std::span<const std::byte>, std::span<const std::byte>) const {
  throw InvariantError("a tier key without OpenSSL");
}

bool same_mac(const TierKey::Mac& a, const TierKey::Mac& b) noexcept {
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

#endif

TierKey::TierKey(std::shared_ptr<const State> state) : state_(std::move(state)) {
  const Mac named = mac(std::as_bytes(std::span(kIdText, sizeof(kIdText) - 1)), {});
  std::memcpy(&id_, named.data(), sizeof(id_));
  if (id_ == 0) id_ = 1;  // 0 means "no key" in records and files
}

TierKey TierKey::from_file(const std::filesystem::path& path) {
  if (!tier_keys_available()) return from_secret({});  // says why
  return from_secret(read_key_file(path));
}

std::optional<std::filesystem::path> tier_key_file_from_environment() {
  const char* file = std::getenv("KVTIER_TIER_KEY_FILE");
  if (file == nullptr || *file == '\0') return std::nullopt;
  return std::filesystem::path(file);
}

}  // namespace kvtier::tiers
