//! Serving the gateway's HTTP connections so that no client, signed or
//! not, can take it down: a cap on live connections (from the process's
//! descriptor limit), the oldest idle one closed for a new one at the cap,
//! a timeout on reading a request's headers (and so on idle keep-alive
//! connections), and a backoff with a rate-limited warning after failed
//! accepts (out of descriptors, say), where the loop used to spin and log.
//! With a certificate the connections are TLS (rustls), the handshake
//! bounded by the header timeout.
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify};

/// How long a connection may take to send a request's headers, and stay
/// idle between requests (S3's own servers close idle ones after ~20 s).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// Live connections at most, whatever the descriptor limit allows.
const MAX_CONNECTIONS: usize = 16_384;
/// Failed accepts are said in the log at most this often.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);
/// The longest pause after failed accepts (it doubles from 10 ms).
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The connections this process may keep, its soft descriptor limit
/// first raised to the hard one (see [`cap_of`]).
pub fn connection_cap() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let limit = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(_) => soft,
        },
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    };
    cap_of(limit)
}

/// The connections a process with `descriptors` may keep: half of them,
/// the rest left for the database, the object store and the cache.
fn cap_of(descriptors: u64) -> usize {
    (descriptors / 2).clamp(16, MAX_CONNECTIONS as u64) as usize
}

/// One live connection as the table knows it.
struct Live {
    /// Requests being answered on it (a response counts until its body is
    /// sent): 0 is idle, or still sending its headers.
    busy: Arc<AtomicUsize>,
    /// Closes it (dropped: it ended by itself).
    close: Option<oneshot::Sender<()>>,
}

/// The live connections, oldest first, and what admitting one more does.
#[derive(Default)]
struct Table {
    next: u64,
    live: BTreeMap<u64, Live>,
}

/// What admitting one more connection decides.
#[derive(Debug, PartialEq, Eq)]
enum Admission {
    /// Below the cap: serve it.
    Room,
    /// At the cap: close connection (id), the oldest idle one, and serve it.
    Evict(u64),
    /// At the cap with every connection answering a request, or one
    /// closed for room not yet gone: accept nothing until one ends (so
    /// that at most cap + 1 connections hold descriptors).
    Full,
}

impl Table {
    fn admission(&self, cap: usize) -> Admission {
        if self.live.len() < cap {
            return Admission::Room;
        }
        if self.live.values().any(|c| c.close.is_none()) {
            return Admission::Full;
        }
        match self
            .live
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
        {
            Some((&id, _)) => Admission::Evict(id),
            None => Admission::Full,
        }
    }

    fn add(&mut self, busy: Arc<AtomicUsize>, close: oneshot::Sender<()>) -> u64 {
        let id = self.next;
        self.next += 1;
        self.live.insert(
            id,
            Live {
                busy,
                close: Some(close),
            },
        );
        id
    }

    /// Closes connection `id` (its task ends it and removes it).
    fn close(&mut self, id: u64) {
        if let Some(close) = self.live.get_mut(&id).and_then(|c| c.close.take()) {
            let _ = close.send(());
        }
    }
}

/// Counts a request on its connection until dropped.
struct BusyGuard(Arc<AtomicUsize>);

impl BusyGuard {
    fn new(busy: &Arc<AtomicUsize>) -> BusyGuard {
        busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard(busy.clone())
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether a request has a body (which the answer may leave unread).
fn has_body<B>(req: &hyper::Request<B>) -> bool {
    let headers = req.headers();
    headers.contains_key(hyper::header::TRANSFER_ENCODING)
        || headers
            .get(hyper::header::CONTENT_LENGTH)
            .is_some_and(|n| n.as_bytes() != b"0")
}

/// A response body that keeps its connection counted busy until it is
/// sent (a large GET streams long after the service answered).
pub struct Counted {
    inner: Pin<Box<s3s::Body>>,
    _busy: BusyGuard,
}

impl Body for Counted {
    type Data = <s3s::Body as Body>::Data;
    type Error = <s3s::Body as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.inner.as_mut().poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Failed accepts, said at most every [`ACCEPT_WARN_EVERY`].
#[derive(Default)]
struct AcceptErrors {
    streak: u32,
    unsaid: u64,
    said: Option<Instant>,
}

impl AcceptErrors {
    /// Notes a failed accept: how long to pause, and the warning to log now (if any).
    fn failed(&mut self, e: &std::io::Error, now: Instant) -> (Duration, Option<String>) {
        self.streak = (self.streak + 1).min(10);
        self.unsaid += 1;
        let pause = (Duration::from_millis(10) * (1 << (self.streak - 1))).min(ACCEPT_BACKOFF_MAX);
        let due = self
            .said
            .is_none_or(|t| now.duration_since(t) >= ACCEPT_WARN_EVERY);
        if !due {
            return (pause, None);
        }
        let warning = format!(
            "accepting S3 connections: {e} ({} failure(s) since the last warning; pausing \
             up to {} ms between tries: raise the descriptor limit (ulimit -n) if this lasts)",
            self.unsaid,
            ACCEPT_BACKOFF_MAX.as_millis()
        );
        self.unsaid = 0;
        self.said = Some(now);
        (pause, Some(warning))
    }

    fn accepted(&mut self) {
        self.streak = 0;
    }
}

/// The TLS side of the gateway's connections, from a PEM certificate
/// chain and its PEM private key.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use anyhow::Context;
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the certificate chain {}", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{} holds no PEM certificate",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and the private key")?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serves `service` on `listener` (over TLS with `tls`) until `stop`
/// resolves, with at most `cap` live connections.
pub async fn serve(
    listener: TcpListener,
    service: s3s::service::S3Service,
    cap: usize,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: impl std::future::Future<Output = ()>,
) {
    let table = Arc::new(Mutex::new(Table::default()));
    let ended = Arc::new(Notify::new());
    let mut errors = AcceptErrors::default();
    tokio::pin!(stop);
    loop {
        // at the cap with none to close for room, accept nothing until one ends
        loop {
            let notified = ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let admission = table.lock().unwrap().admission(cap);
            if admission != Admission::Full {
                break;
            }
            tokio::select! {
                _ = notified => {}
                _ = &mut stop => return,
            }
        }
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    errors.accepted();
                    stream
                }
                Err(e) => {
                    let (pause, warning) = errors.failed(&e, Instant::now());
                    if let Some(w) = warning {
                        tracing::warn!("{w}");
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => continue,
                        _ = &mut stop => return,
                    }
                }
            },
            _ = &mut stop => return,
        };
        // (small answers go out at once, not after the peer's delayed ACK)
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let busy = Arc::new(AtomicUsize::new(0));
        let (close, closed) = oneshot::channel();
        let id = {
            let mut t = table.lock().unwrap();
            if let Admission::Evict(oldest) = t.admission(cap) {
                tracing::debug!("{cap} S3 connections live: closing the oldest idle one");
                t.close(oldest);
            }
            t.add(busy.clone(), close)
        };
        let (table, ended, service, tls) =
            (table.clone(), ended.clone(), service.clone(), tls.clone());
        tokio::spawn(async move {
            let counted = hyper::service::service_fn(move |req| {
                let guard = BusyGuard::new(&busy);
                let has_body = has_body(&req);
                let call = hyper::service::Service::call(&service, req);
                async move {
                    let mut response = call.await?;
                    // an error may come before the body is read (a client
                    // waiting on Expect: 100-continue never sends it): the
                    // connection ends with it, so that no byte of the next
                    // request is read as this one's body
                    if has_body && !response.status().is_success() {
                        response.headers_mut().insert(
                            hyper::header::CONNECTION,
                            hyper::header::HeaderValue::from_static("close"),
                        );
                    }
                    Ok::<_, s3s::HttpError>(response.map(|body| Counted {
                        inner: Box::pin(body),
                        _busy: guard,
                    }))
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let served = async {
                match tls {
                    None => builder
                        .serve_connection(TokioIo::new(stream), counted)
                        .await
                        .map_err(|e| e.to_string()),
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream));
                        let stream = match handshake.await {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => return Err(format!("TLS handshake: {e}")),
                            Err(_) => return Err("TLS handshake timed out".to_string()),
                        };
                        builder
                            .serve_connection(TokioIo::new(stream), counted)
                            .await
                            .map_err(|e| e.to_string())
                    }
                }
            };
            tokio::select! {
                served = served => if let Err(e) = served {
                    tracing::debug!("S3 connection: {e}");
                },
                _ = closed => {}
            }
            table.lock().unwrap().live.remove(&id);
            ended.notify_waiters();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(t: &mut Table, busy: usize) -> (u64, Arc<AtomicUsize>, oneshot::Receiver<()>) {
        let b = Arc::new(AtomicUsize::new(busy));
        let (tx, rx) = oneshot::channel();
        (t.add(b.clone(), tx), b, rx)
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let mut t = Table::default();
        assert_eq!(t.admission(3), Admission::Room);
        let (first, first_busy, _r1) = conn(&mut t, 1);
        let (second, _, mut closed) = conn(&mut t, 0);
        let (third, _, _r3) = conn(&mut t, 0);
        // the first answers a request: the second is the oldest idle one
        assert_eq!(t.admission(3), Admission::Evict(second));
        t.close(second);
        assert!(closed.try_recv().is_ok(), "its task is told to close it");
        let (fourth, _, _r4) = conn(&mut t, 0);
        assert_eq!(
            t.admission(3),
            Admission::Full,
            "no more until the closed one is gone"
        );
        t.live.remove(&second);
        t.live.remove(&fourth);
        assert_eq!(t.admission(3), Admission::Room);
        // every connection busy: wait
        let (_, _, _r4) = conn(&mut t, 2);
        t.live.get(&third).unwrap().busy.store(1, Ordering::Release);
        assert_eq!(t.admission(3), Admission::Full);
        first_busy.store(0, Ordering::Release);
        assert_eq!(t.admission(3), Admission::Evict(first));
    }

    #[test]
    fn a_response_keeps_its_connection_busy_until_its_body_is_sent() {
        let busy = Arc::new(AtomicUsize::new(0));
        let guard = BusyGuard::new(&busy);
        let body = Counted {
            inner: Box::pin(s3s::Body::from("x".to_string())),
            _busy: guard,
        };
        assert_eq!(busy.load(Ordering::Acquire), 1);
        drop(body);
        assert_eq!(busy.load(Ordering::Acquire), 0);
    }

    #[test]
    fn failed_accepts_back_off_and_are_said_once_per_interval() {
        let mut errors = AcceptErrors::default();
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let t0 = Instant::now();
        let (pause, said) = errors.failed(&emfile, t0);
        assert_eq!(pause, Duration::from_millis(10));
        assert!(said.unwrap().contains("1 failure(s)"));
        let mut pauses = vec![];
        for i in 1..2000 {
            let (pause, said) = errors.failed(&emfile, t0 + Duration::from_millis(i));
            assert!(said.is_none(), "a warning within 10 s of the last");
            pauses.push(pause);
        }
        assert_eq!(pauses[0], Duration::from_millis(20));
        assert_eq!(*pauses.last().unwrap(), ACCEPT_BACKOFF_MAX);
        let (_, said) = errors.failed(&emfile, t0 + ACCEPT_WARN_EVERY);
        assert!(said.unwrap().contains("2000 failure(s)"));
        errors.accepted();
        let (pause, _) = errors.failed(&emfile, t0 + ACCEPT_WARN_EVERY);
        assert_eq!(pause, Duration::from_millis(10));
    }

    #[test]
    fn the_cap_leaves_descriptors_for_the_rest() {
        assert_eq!(cap_of(256), 128);
        assert_eq!(cap_of(20_000), 10_000);
        assert_eq!(cap_of(10), 16);
        assert_eq!(cap_of(1 << 20), MAX_CONNECTIONS);
    }
}
