// Certificates made in the test with OpenSSL's API: CAs, server and client certificates, and
// the bad ones (expired, from another CA) that the shell script cannot easily make.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace trainenv::test {

struct pem_pair {
  std::string cert;
  std::string key;
};

struct cert_options {
  std::string common_name = "trainenv test";
  bool is_ca = false;
  bool client = false;            // clientAuth instead of serverAuth
  long valid_from_seconds = -60;  // relative to now
  long valid_until_seconds = 3600;
  // A client certificate's subjectAltName ("DNS:kube-apiserver"); empty: none, the CN alone.
  std::string client_alt_names = {};
};

inline pem_pair make_cert(const cert_options& o, const pem_pair* issuer = nullptr) {
  const auto check = [](bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("OpenSSL: ") + what);
  };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  check(key != nullptr, "key");
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), X509_free);
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), o.valid_from_seconds);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), o.valid_until_seconds);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(o.common_name.c_str()), -1, -1,
                             0);

  std::unique_ptr<X509, decltype(&X509_free)> issuer_cert(nullptr, X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> issuer_key(nullptr, EVP_PKEY_free);
  if (issuer != nullptr) {
    BIO* cb = BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size()));
    issuer_cert.reset(PEM_read_bio_X509(cb, nullptr, nullptr, nullptr));
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size()));
    issuer_key.reset(PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr));
    BIO_free(kb);
    check(issuer_cert && issuer_key, "issuer");
  }
  X509_set_issuer_name(x.get(), X509_get_subject_name(issuer_cert ? issuer_cert.get() : x.get()));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : x.get(), x.get(), nullptr, nullptr, 0);
  const auto add = [&](int nid, const char* value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    check(ext != nullptr, "extension");
    X509_add_ext(x.get(), ext, -1);
    X509_EXTENSION_free(ext);
  };
  if (o.is_ca) {
    add(NID_basic_constraints, "critical,CA:TRUE");
    add(NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add(NID_basic_constraints, "critical,CA:FALSE");
    add(NID_key_usage, "critical,digitalSignature");
    add(NID_ext_key_usage, o.client ? "clientAuth" : "serverAuth");
    if (!o.client) add(NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    if (o.client && !o.client_alt_names.empty())
      add(NID_subject_alt_name, o.client_alt_names.c_str());
  }
  check(X509_sign(x.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()) > 0, "sign");

  pem_pair out;
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x.get());
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  out.cert.assign(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  size = BIO_get_mem_data(bio, &data);
  out.key.assign(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  return out;
}

// A certificate's serial number in hex, as OpenSSL prints it.
inline std::string serial_hex(const X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = hex;
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace trainenv::test
