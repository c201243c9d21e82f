#include "tls/server_cert.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "tls/x509.h"

namespace hutch::tls {

namespace {

constexpr long kTenYears = 10L * 365 * 24 * 3600;

Result<std::string> readAll(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(Errc::kNotFound,
                std::string(what) + " " + path.string() + " cannot be read; check the path");
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<> writeAtomically(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(sysError("Cannot write " + tmp.string(), errno));
    ::chmod(tmp.c_str(), mode);
    out << text;
    if (!out.flush()) return fail(sysError("Cannot write " + tmp.string(), errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Errc::kInternal, "Cannot rename " + tmp.string() + ": " + ec.message());
  return ok();
}

}  // namespace

Result<CertPair> makeSelfSigned(const std::vector<std::string>& dns_names,
                                const std::vector<std::string>& ip_addresses) {
  HUTCH_TRY(KeyPtr key, newEcKey());
  HUTCH_TRY(X509Ptr cert, newCertificate(kTenYears));
  HUTCH_TRY_VOID(setName(X509_get_subject_name(cert.get()), "hutchd"));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return fail(cryptoError("Cannot fill the server certificate"));
  }
  std::string san;
  for (const std::string& name : dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + name;
  for (const std::string& ip : ip_addresses) san += (san.empty() ? "IP:" : ",IP:") + ip;
  X509* c = cert.get();
  // An end-entity certificate that is its own trust anchor: CA:FALSE. rustls (E2B's Python SDK
  // from 2.35, through pyqwest) refuses a CA certificate used as a server's
  // ("CaUsedAsEndEntity"); OpenSSL (the CLI, Node, Python's ssl) accepts either form once the
  // file is trusted.
  HUTCH_TRY_VOID(addExtension(c, c, NID_basic_constraints, "critical,CA:FALSE"));
  HUTCH_TRY_VOID(addExtension(c, c, NID_key_usage, "critical,digitalSignature"));
  HUTCH_TRY_VOID(addExtension(c, c, NID_ext_key_usage, "serverAuth"));
  if (!san.empty()) HUTCH_TRY_VOID(addExtension(c, c, NID_subject_alt_name, san.c_str()));
  HUTCH_TRY_VOID(addExtension(c, c, NID_subject_key_identifier, "hash"));
  if (X509_sign(c, key.get(), EVP_sha256()) == 0) {
    return fail(cryptoError("Cannot sign the server certificate"));
  }
  HUTCH_TRY(std::string cert_pem, pemOf(c));
  HUTCH_TRY(std::string key_pem, pemOf(key.get()));
  return CertPair{std::move(cert_pem), std::move(key_pem)};
}

Result<CertFiles> ensureSelfSigned(const std::filesystem::path& dir,
                                   const std::vector<std::string>& dns_names,
                                   const std::vector<std::string>& ip_addresses) {
  CertFiles files{dir / "cert.pem", dir / "key.pem"};
  if (std::filesystem::exists(files.cert) && std::filesystem::exists(files.key)) return files;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(Errc::kInternal, "Cannot create " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  HUTCH_TRY(CertPair pair, makeSelfSigned(dns_names, ip_addresses));
  HUTCH_TRY_VOID(writeAtomically(files.key, pair.key, 0600));
  HUTCH_TRY_VOID(writeAtomically(files.cert, pair.cert, 0644));
  files.made = true;
  return files;
}

Result<std::string> checkCertFiles(const std::filesystem::path& cert_path,
                                   const std::filesystem::path& key_path) {
  HUTCH_TRY(std::string cert_pem, readAll(cert_path, "The TLS certificate"));
  HUTCH_TRY(std::string key_pem, readAll(key_path, "The TLS key"));
  HUTCH_TRY(X509Ptr cert, parseCertPem(cert_pem, "The TLS certificate " + cert_path.string()));
  HUTCH_TRY(KeyPtr key, parseKeyPem(key_pem, "The TLS key " + key_path.string()));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return fail(Errc::kInvalidArgument, "The TLS key " + key_path.string() +
                                            " does not belong to the certificate " +
                                            cert_path.string());
  }
  return fingerprintSha256(cert.get());
}

void hostNames(std::vector<std::string>& dns_names, std::vector<std::string>& ip_addresses) {
  auto add = [](std::vector<std::string>& list, const std::string& value) {
    if (!value.empty() && std::find(list.begin(), list.end(), value) == list.end()) {
      list.push_back(value);
    }
  };
  add(dns_names, "localhost");
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) add(dns_names, host);
  add(ip_addresses, "127.0.0.1");
  add(ip_addresses, "::1");
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                  sizeof text);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope; useless in a SAN
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    } else {
      continue;
    }
    add(ip_addresses, text);
  }
  ::freeifaddrs(list);
}

}  // namespace hutch::tls
