//! TLS to PostgreSQL, asked for in META_URL with libpq's options: sslmode, sslrootcert, sslcert, sslkey.
//!
//! `sslmode` as libpq reads it: `disable` never, `prefer` (the default)
//! when the server offers it, `require` always (the certificate checked
//! against `sslrootcert` only if that is given), `verify-ca` always with a
//! certificate signed by `sslrootcert`, `verify-full` as verify-ca and for
//! the host name in META_URL. `sslrootcert=system` trusts the system's CAs;
//! without `sslrootcert` the verify modes use `~/.postgresql/root.crt`, as
//! libpq does. `sslcert`/`sslkey` give a client certificate. Over a unix
//! socket there is no TLS (nor a need for it).
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How far the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Not at all (sslmode prefer or require without sslrootcert): TLS
    /// against eavesdroppers only.
    Nothing,
    /// Signed by a trusted CA (verify-ca, or require with sslrootcert).
    Ca,
    /// Signed by a trusted CA and for the host connected to (verify-full).
    Full,
}

/// The TLS options of a META_URL.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    mode: Option<String>,
    root_cert: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

impl TlsOptions {
    /// Takes the TLS options out of the query of `meta_url` (tokio-postgres
    /// knows only some of them, and only some of their values); returns
    /// the URL without them.
    pub fn split(meta_url: &str) -> (String, TlsOptions) {
        let mut tls = TlsOptions::default();
        let Some((base, query)) = meta_url.split_once('?') else {
            return (meta_url.to_string(), tls);
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| {
                let Some((k, v)) = kv.split_once('=') else {
                    return true;
                };
                let v = percent_decoded(v);
                match k {
                    "sslmode" => tls.mode = Some(v),
                    "sslrootcert" => tls.root_cert = Some(v),
                    "sslcert" => tls.cert = Some(v.into()),
                    "sslkey" => tls.key = Some(v.into()),
                    _ => return true,
                }
                false
            })
            .collect();
        let url = match kept.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", kept.join("&")),
        };
        (url, tls)
    }

    /// The ssl mode to give tokio-postgres, and the connector that does
    /// the TLS these options ask for.
    pub fn connector(&self) -> anyhow::Result<(SslMode, MakeRustlsConnect)> {
        let (mode, check) = match self.mode.as_deref().unwrap_or("prefer") {
            "disable" => (SslMode::Disable, Check::Nothing),
            "allow" | "prefer" => (SslMode::Prefer, Check::Nothing),
            "require" if self.root_cert.is_some() => (SslMode::Require, Check::Ca),
            "require" => (SslMode::Require, Check::Nothing),
            "verify-ca" => (SslMode::Require, Check::Ca),
            "verify-full" => (SslMode::Require, Check::Full),
            other => anyhow::bail!(
                "sslmode={other} in META_URL: use disable, prefer, require, verify-ca or verify-full"
            ),
        };
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let verifier: Arc<dyn ServerCertVerifier> = match check {
            Check::Nothing => Arc::new(Unchecked(provider)),
            Check::Ca | Check::Full => {
                let roots = Arc::new(self.roots()?);
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
                match check {
                    Check::Full => webpki,
                    _ => Arc::new(AnyName(webpki)),
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let certs = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| anyhow::anyhow!("sslcert {}: {e}", cert.display()))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| anyhow::anyhow!("sslkey {}: {e}", key.display()))?;
                builder.with_client_auth_cert(certs, key)?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => anyhow::bail!("META_URL gives sslcert or sslkey without the other"),
        };
        Ok((mode, MakeRustlsConnect::new(config)))
    }

    /// The CAs the verify modes trust.
    fn roots(&self) -> anyhow::Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        if self.root_cert.as_deref() == Some("system") {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            anyhow::ensure!(
                !roots.is_empty(),
                "sslrootcert=system: no CA certificate found on this system"
            );
            return Ok(roots);
        }
        let file = match &self.root_cert {
            Some(f) => PathBuf::from(f),
            None => default_root_cert().ok_or_else(|| {
                anyhow::anyhow!(
                    "sslmode {} checks the server's certificate: give its CA with \
                     sslrootcert=FILE (or sslrootcert=system) in META_URL",
                    self.mode.as_deref().unwrap_or_default()
                )
            })?,
        };
        let certs = CertificateDer::pem_file_iter(&file)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| anyhow::anyhow!("sslrootcert {}: {e}", file.display()))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        anyhow::ensure!(
            added > 0,
            "sslrootcert {}: no CA certificate in it",
            file.display()
        );
        Ok(roots)
    }
}

/// libpq's default CA file, if there is one.
fn default_root_cert() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let file = Path::new(&home).join(".postgresql/root.crt");
    file.exists().then_some(file)
}

/// `%XX` escapes of a URL query value decoded (paths with spaces).
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Accepts any certificate (the handshake's signatures are still checked).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A CA-signed certificate for any host name (verify-ca).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_leave_the_url_and_unknown_modes_are_refused() {
        let (url, tls) = TlsOptions::split(
            "postgres://u@db:5432/v?sslmode=verify-full&pgbouncer=true&sslrootcert=%2Fetc%2Fca%20x.crt",
        );
        assert_eq!(url, "postgres://u@db:5432/v?pgbouncer=true");
        assert_eq!(tls.mode.as_deref(), Some("verify-full"));
        assert_eq!(tls.root_cert.as_deref(), Some("/etc/ca x.crt"));
        let (url, tls) = TlsOptions::split("postgres://u@db/v");
        assert_eq!(url, "postgres://u@db/v");
        assert_eq!(tls.connector().unwrap().0, SslMode::Prefer);
        let (_, tls) = TlsOptions::split("postgres://u@db/v?sslmode=verify-everything");
        assert!(tls.connector().is_err());
        let (_, tls) = TlsOptions::split("postgres://u@db/v?sslmode=disable");
        assert_eq!(tls.connector().unwrap().0, SslMode::Disable);
        let (_, tls) =
            TlsOptions::split("postgres://u@db/v?sslmode=verify-full&sslrootcert=/nonexistent");
        let e = tls.connector().err().unwrap().to_string();
        assert!(e.contains("/nonexistent"), "{e}");
    }
}
