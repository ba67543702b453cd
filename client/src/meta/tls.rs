//! TLS to PostgreSQL, asked for in META_URL with libpq's options and meaning what they mean in libpq: sslmode, sslrootcert, sslcert, sslkey.
//!
//! OpenSSL does the TLS, as in libpq, so that what `psql` accepts jfs
//! accepts (X.509 v1 certificates, certificates named by their CN only)
//! and what `psql` refuses jfs refuses. As libpq (PostgreSQL 15/16):
//! - `sslmode`: `disable` never, `allow`/`prefer` (the default) when the
//!   server offers it, `require` always, `verify-ca` always with a chain to
//!   a trusted CA, `verify-full` as verify-ca and for the host connected to.
//! - The CA file is `sslrootcert`, else `~/.postgresql/root.crt`, and only
//!   its CAs are trusted (not the system's). When it
//!   exists the certificate is checked in every mode (so `require` acts as
//!   `verify-ca`); when it does not, the verify modes are refused and the
//!   others go on unchecked. `sslrootcert=system` trusts the system's CAs
//!   and asks for `verify-full` (weaker modes are refused).
//! - The host name is matched as libpq matches it: against the subject
//!   alternative names of the host's type (DNS or IP address), and against
//!   the common name only if there is none of that type; a leading `*.`
//!   stands for one label.
//! - A client certificate is `sslcert` (else `~/.postgresql/postgresql.crt`
//!   if it exists) with `sslkey` (else `~/.postgresql/postgresql.key`); a
//!   key readable by group or others is refused.
//!
//! Over a unix socket there is no TLS (nor a need for it).
use std::error::Error;
use std::fmt::Debug;
use std::future::Future;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use openssl::error::ErrorStack;
use openssl::nid::Nid;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::store::{X509Store, X509StoreBuilder};
use openssl::x509::{X509Ref, X509VerifyResult, X509};
use postgres_openssl::TlsConnector;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

use super::tls_fork::{self, Guarded, GuardedStream};

/// How far the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Not at all (no CA file, sslmode weaker than verify-ca): TLS
    /// against eavesdroppers only.
    Nothing,
    /// A chain to a trusted CA (verify-ca, or any mode with a CA file).
    Ca,
    /// A chain to a trusted CA, for the host connected to (verify-full).
    Full,
}

/// Where the trusted CAs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// None: the certificate is not checked.
    None,
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The system's trusted CAs (`sslrootcert=system`).
    System,
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
    /// the TLS these options ask for. Over unix sockets only (`sockets_only`)
    /// there is no TLS, as in libpq: the options are checked but no TLS
    /// context is made (OpenSSL is never called).
    pub fn connector(&self, sockets_only: bool) -> anyhow::Result<(SslMode, Connector)> {
        let system = self.root_cert.as_deref() == Some("system");
        let mode = match (self.mode.as_deref(), system) {
            (None, true) => "verify-full",
            (None, false) => "prefer",
            (Some(mode), _) => mode,
        };
        let ssl_mode = match mode {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" | "verify-ca" | "verify-full" => SslMode::Require,
            other => anyhow::bail!(
                "sslmode={other} in META_URL: use disable, allow, prefer, require, verify-ca \
                 or verify-full"
            ),
        };
        anyhow::ensure!(
            !system || mode == "verify-full",
            "weak sslmode \"{mode}\" may not be used with sslrootcert=system (use \"verify-full\")"
        );
        if sockets_only || ssl_mode == SslMode::Disable {
            let connector = Connector {
                ssl: None,
                check: Check::Nothing,
            };
            return Ok((SslMode::Disable, connector));
        }
        let _openssl = tls_fork::section();
        let verify = mode.starts_with("verify-");
        let roots = self.roots(verify)?;
        let check = match (&roots, mode) {
            (Roots::None, _) => Check::Nothing,
            (_, "verify-full") => Check::Full,
            _ => Check::Ca,
        };
        let mut builder = SslConnector::builder(SslMethod::tls_client())?;
        builder.set_min_proto_version(Some(SslVersion::TLS1_2))?;
        // (the builder starts out trusting the system's CAs: libpq trusts
        // only the file given, so the store is replaced by one holding it)
        match &roots {
            Roots::None => builder.set_verify(SslVerifyMode::NONE),
            Roots::File(file) => builder.set_cert_store(ca_store(file)?),
            Roots::System => builder.set_default_verify_paths()?,
        }
        if let Some((cert, key)) = self.client_cert()? {
            builder.set_certificate_chain_file(&cert).map_err(|e| {
                anyhow::anyhow!(
                    "could not read certificate file \"{}\": {e}",
                    cert.display()
                )
            })?;
            builder
                .set_private_key_file(&key, SslFiletype::PEM)
                .map_err(|e| {
                    anyhow::anyhow!("could not load private key file \"{}\": {e}", key.display())
                })?;
            builder.check_private_key().map_err(|e| {
                anyhow::anyhow!(
                    "certificate does not match private key file \"{}\": {e}",
                    key.display()
                )
            })?;
        }
        let connector = Connector {
            ssl: Some(Arc::new(Guarded::new(builder.build()))),
            check,
        };
        Ok((ssl_mode, connector))
    }

    /// The CAs to check the server's certificate against, as libpq finds
    /// them: the verify modes need them, the others use them if they exist.
    fn roots(&self, verify: bool) -> anyhow::Result<Roots> {
        if self.root_cert.as_deref() == Some("system") {
            return Ok(Roots::System);
        }
        let file = match &self.root_cert {
            Some(file) => Some(PathBuf::from(file)),
            None => home_file("root.crt"),
        };
        match file {
            Some(file) if file.exists() => Ok(Roots::File(file)),
            _ if !verify => Ok(Roots::None),
            Some(file) => anyhow::bail!(
                "root certificate file \"{}\" does not exist: give the server's CA with \
                 sslrootcert=FILE (or sslrootcert=system) in META_URL, or change sslmode to \
                 disable server certificate verification",
                file.display()
            ),
            None => anyhow::bail!(
                "sslmode {} checks the server's certificate: give its CA with sslrootcert=FILE \
                 (or sslrootcert=system) in META_URL",
                self.mode.as_deref().unwrap_or_default()
            ),
        }
    }

    /// The client certificate and key to present, if any: `sslcert` (or
    /// libpq's default file if it exists) with `sslkey` (or its default).
    fn client_cert(&self) -> anyhow::Result<Option<(PathBuf, PathBuf)>> {
        let cert = match &self.cert {
            Some(cert) => cert.clone(),
            None => match home_file("postgresql.crt") {
                Some(cert) if cert.exists() => cert,
                _ => return Ok(None),
            },
        };
        anyhow::ensure!(
            cert.exists(),
            "could not open certificate file \"{}\": it does not exist",
            cert.display()
        );
        let key = match &self.key {
            Some(key) => key.clone(),
            None => home_file("postgresql.key").unwrap_or_default(),
        };
        let meta = std::fs::metadata(&key).map_err(|e| {
            anyhow::anyhow!(
                "certificate present, but not private key file \"{}\": {e}",
                key.display()
            )
        })?;
        anyhow::ensure!(
            meta.is_file(),
            "private key file \"{}\" is not a regular file",
            key.display()
        );
        let owner_only = meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o077 != 0;
        let root_group_read = meta.uid() == 0 && meta.mode() & 0o037 != 0;
        anyhow::ensure!(
            !owner_only && !root_group_read,
            "private key file \"{}\" has group or world access; file must have permissions \
             u=rw (0600) or less if owned by the current user, or permissions u=rw,g=r (0640) \
             or less if owned by root",
            key.display()
        );
        Ok(Some((cert, key)))
    }
}

/// A certificate store holding the CA certificates of PEM file `file`
/// and nothing else.
fn ca_store(file: &Path) -> anyhow::Result<X509Store> {
    let unreadable = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "could not read root certificate file \"{}\": {e}",
            file.display()
        )
    };
    let pem = std::fs::read(file).map_err(|e| unreadable(&e))?;
    let certs = X509::stack_from_pem(&pem).map_err(|e| unreadable(&e))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "could not read root certificate file \"{}\": no certificate in it",
        file.display()
    );
    let mut store = X509StoreBuilder::new()?;
    for cert in certs {
        store.add_cert(cert)?;
    }
    Ok(store.build())
}

/// `~/.postgresql/NAME`, libpq's default for its TLS files.
fn home_file(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".postgresql").join(name))
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

/// Makes the TLS connection of each new PostgreSQL connection, checking
/// the server's certificate as the options ask.
#[derive(Clone)]
pub struct Connector {
    /// None where TLS is never used (sslmode=disable, unix sockets).
    ssl: Option<Arc<Guarded<SslConnector>>>,
    check: Check,
}

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Debug + Send + Sync + 'static,
{
    type Stream = GuardedStream<S>;
    type TlsConnect = Connect;
    type Error = ErrorStack;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connect, ErrorStack> {
        let refusal = Arc::new(Mutex::new(None));
        let Some(context) = &self.ssl else {
            return Ok(Connect {
                handshake: None,
                refusal,
            });
        };
        let _openssl = tls_fork::section();
        let mut ssl = context.configure()?;
        // the host name is checked below, as libpq checks it
        ssl.set_verify_hostname(false);
        if self.check == Check::Full {
            let (host, said) = (host.to_string(), refusal.clone());
            ssl.set_verify_callback(SslVerifyMode::PEER, move |chain_ok, store| {
                if !chain_ok || store.error_depth() != 0 {
                    return chain_ok;
                }
                let Some(cert) = store.current_cert() else {
                    return false;
                };
                match certificate_names_host(cert, &host) {
                    Ok(()) => true,
                    Err(why) => {
                        *said.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                        store.set_error(X509VerifyResult::APPLICATION_VERIFICATION);
                        false
                    }
                }
            });
        }
        Ok(Connect {
            handshake: Some(Guarded::new(TlsConnector::new(ssl, host))),
            refusal,
        })
    }
}

/// One connection's TLS handshake, and why its certificate was refused.
pub struct Connect {
    /// None where TLS is never used (see [`Connector`]).
    handshake: Option<Guarded<TlsConnector>>,
    refusal: Arc<Mutex<Option<String>>>,
}

type Handshake<S> =
    Pin<Box<dyn Future<Output = Result<GuardedStream<S>, Box<dyn Error + Send + Sync>>> + Send>>;

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = GuardedStream<S>;
    type Error = Box<dyn Error + Send + Sync>;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        let Connect { handshake, refusal } = self;
        let Some(handshake) = handshake else {
            return Box::pin(async { Err("TLS is not used on this connection".into()) });
        };
        let mut handshake = {
            let _openssl = tls_fork::section();
            Guarded::new(handshake.into_inner().connect(stream))
        };
        Box::pin(async move {
            let done = std::future::poll_fn(|cx| {
                let _openssl = tls_fork::section();
                handshake.as_mut().poll(cx)
            });
            match done.await {
                Ok(stream) => Ok(GuardedStream::new(stream)),
                Err(e) => {
                    let why = refusal.lock().unwrap_or_else(|e| e.into_inner()).take();
                    Err(why.map_or(e, Into::into))
                }
            }
        })
    }
}

/// Whether `cert` is for `host`, decided as libpq decides it: the subject
/// alternative names (DNS names and IP addresses) are tried, and the common
/// name only when no alternative name is of the host's own type.
fn certificate_names_host(cert: &X509Ref, host: &str) -> Result<(), String> {
    let host_ip: Option<IpAddr> = host.parse().ok();
    let mut examined = Vec::new();
    let mut check_common_name = true;
    for name in cert.subject_alt_names().iter().flatten() {
        if let Some(dns) = name.dnsname() {
            check_common_name &= host_ip.is_some();
            if !dns.contains('\0') && name_matches(dns, host) {
                return Ok(());
            }
            examined.push(dns.to_string());
        } else if let Some(octets) = name.ipaddress() {
            check_common_name &= host_ip.is_none();
            let address = match octets.len() {
                4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
                16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
                _ => None,
            };
            if address.is_some() && address == host_ip {
                return Ok(());
            }
            examined.push(address.map_or("?".into(), |a| a.to_string()));
        }
    }
    if check_common_name {
        let common = cert.subject_name().entries_by_nid(Nid::COMMONNAME).next();
        // a name with a NUL in it matches no host (libpq refuses it)
        if let Some(common) = common.and_then(|c| std::str::from_utf8(c.data().as_slice()).ok()) {
            if !common.contains('\0') && name_matches(common, host) {
                return Ok(());
            }
            examined.push(common.to_string());
        }
    }
    Err(match examined.as_slice() {
        [] => "could not get server's host name from server certificate".into(),
        [only] => format!("server certificate for \"{only}\" does not match host name \"{host}\""),
        [first, others @ ..] => format!(
            "server certificate for \"{first}\" (and {} other name{}) does not match host \
             name \"{host}\"",
            others.len(),
            if others.len() == 1 { "" } else { "s" }
        ),
    })
}

/// A certificate's name against the host name: equal ignoring case, or a
/// leading `*.` standing for the host's first label (libpq's rule).
fn name_matches(name: &str, host: &str) -> bool {
    if name.eq_ignore_ascii_case(host) {
        return true;
    }
    let Some(suffix) = name.strip_prefix('*') else {
        return false;
    };
    suffix.starts_with('.')
        && suffix.len() > 1
        && host.len() > suffix.len()
        && host.is_char_boundary(host.len() - suffix.len())
        && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
        && !host[..host.len() - suffix.len()].contains('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_hosts_as_libpq_matches_them() {
        assert!(name_matches("DB.example.com", "db.EXAMPLE.com"));
        assert!(name_matches("*.example.com", "db.example.com"));
        assert!(name_matches("*.example.com", "d.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.example.com", ".example.com"));
        assert!(!name_matches("*.example.com", "a.db.example.com"));
        assert!(!name_matches("d*.example.com", "db.example.com"));
        assert!(!name_matches("*", "db"));
        assert!(!name_matches("*.", "db."));
        assert!(!name_matches("db.example.com", "db.example.co"));
    }

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
        assert_eq!(tls.connector(false).unwrap().0, SslMode::Prefer);
        let (_, tls) = TlsOptions::split("postgres://u@db/v?sslmode=verify-everything");
        assert!(tls.connector(false).is_err());
        let (_, tls) = TlsOptions::split("postgres://u@db/v?sslmode=disable");
        assert_eq!(tls.connector(false).unwrap().0, SslMode::Disable);
        let (_, tls) =
            TlsOptions::split("postgres://u@db/v?sslmode=verify-full&sslrootcert=/nonexistent");
        let e = tls.connector(false).err().unwrap().to_string();
        assert!(e.contains("/nonexistent"), "{e}");
        // over unix sockets only there is no TLS (as in libpq) and no
        // TLS context is made, but the mode must still be one libpq knows
        let (mode, connector) = tls.connector(true).unwrap();
        assert_eq!((mode, connector.ssl.is_none()), (SslMode::Disable, true));
        let (_, tls) = TlsOptions::split("postgres://u@db/v?sslmode=verify-everything");
        assert!(tls.connector(true).is_err());
    }
}
