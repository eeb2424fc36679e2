#include "kvtier/core/page_format.hpp"

#include <xxhash.h>

#include <sstream>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

constexpr KvQuant kQuants[] = {
    KvQuant::None,  KvQuant::Fp8PerTensor, KvQuant::Fp8PerTokenHead, KvQuant::Int8PerTokenHead,
    KvQuant::Nvfp4, KvQuant::Fp8DsMla};
constexpr std::uint64_t kFingerprintVersion = 1;

}  // namespace

const char* kv_quant_name(KvQuant quant) noexcept {
  switch (quant) {
    case KvQuant::None:
      return "none";
    case KvQuant::Fp8PerTensor:
      return "fp8";
    case KvQuant::Fp8PerTokenHead:
      return "fp8_per_token_head";
    case KvQuant::Int8PerTokenHead:
      return "int8_per_token_head";
    case KvQuant::Nvfp4:
      return "nvfp4";
    case KvQuant::Fp8DsMla:
      return "fp8_ds_mla";
  }
  return "?";
}

KvQuant parse_kv_quant(std::string_view name) {
  for (const KvQuant quant : kQuants) {
    if (name == kv_quant_name(quant)) return quant;
  }
  throw ConfigError("unknown KV cache quantization '" + std::string(name) +
                    "' (none, fp8, fp8_per_token_head, int8_per_token_head, nvfp4, fp8_ds_mla)");
}

void validate_page_format(const PageFormat& f, const std::string& where) {
  const auto bad = [&](const std::string& why) { return ConfigError(where + why); };
  if (f.content != PageContent::MambaState && f.block_size == 0) throw bad("a block of at least 1 token");
  switch (f.content) {
    case PageContent::KeyValue:
      if (f.kv_heads == 0 || f.head_dim == 0) throw bad("K/V pages need kv_heads and head_dim");
      if (f.quant == KvQuant::Fp8DsMla) throw bad("fp8_ds_mla is an MLA latent format, not a K/V one");
      if (f.quant == KvQuant::Nvfp4 &&
          (f.head_dim % kNvfp4Block != 0 || f.head_dim_of(KvPart::Value) % kNvfp4Block != 0)) {
        throw bad("nvfp4 needs head sizes that are multiples of 16 (one e4m3 scale per 16 values)");
      }
      break;
    case PageContent::MlaLatent:
      if (f.latent_dim == 0) throw bad("MLA pages need latent_dim");
      if (f.quant != KvQuant::None && f.quant != KvQuant::Fp8PerTensor && f.quant != KvQuant::Fp8DsMla) {
        throw bad(std::string("an MLA latent is plain, fp8 or fp8_ds_mla, not ") + kv_quant_name(f.quant));
      }
      if (f.quant == KvQuant::Fp8DsMla && f.latent_dim % kDsMlaTile != 0) {
        throw bad("fp8_ds_mla needs a latent that is a multiple of 128 (one fp32 scale per 128 values)");
      }
      break;
    case PageContent::MambaState:
      if (f.state_bytes == 0) throw bad("Mamba pages need state_bytes");
      if (f.quant != KvQuant::None) throw bad("a Mamba state is raw bytes: it has no KV quantization");
      if (f.conv_state_bytes > f.state_bytes) throw bad("the conv state cannot be larger than the whole state");
      break;
  }
}

std::uint64_t PageFormat::fingerprint() const noexcept {
  const std::uint64_t fields[] = {kFingerprintVersion,
                                  static_cast<std::uint64_t>(content),
                                  static_cast<std::uint64_t>(quant),
                                  static_cast<std::uint64_t>(quant == KvQuant::None ? dtype : KvDtype::Fp8),
                                  content == PageContent::MambaState ? 0 : block_size,
                                  kv_heads,
                                  head_dim,
                                  head_dim_of(KvPart::Value),
                                  latent_dim,
                                  rope_dim,
                                  state_bytes,
                                  conv_state_bytes};
  return XXH3_64bits(fields, sizeof(fields));
}

std::string PageFormat::describe() const {
  std::ostringstream out;
  const char* element = quant == KvQuant::None ? dtype_name(dtype) : kv_quant_name(quant);
  switch (content) {
    case PageContent::KeyValue:
      out << "K/V " << kv_heads << " heads x " << head_dim;
      if (head_dim_of(KvPart::Value) != head_dim) out << " (V " << head_dim_of(KvPart::Value) << ")";
      out << " " << element;
      break;
    case PageContent::MlaLatent:
      out << "MLA " << latent_dim << "+" << rope_dim << " " << element;
      break;
    case PageContent::MambaState:
      out << "Mamba state " << state_bytes << " B (conv " << conv_state_bytes << " B)";
      break;
  }
  return out.str();
}

}  // namespace kvtier
