//! The mount's Prometheus endpoint: `GET /metrics` over HTTP/1 (hyper).
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

/// Where a mount serves its metrics unless told otherwise (JuiceFS's port).
const DEFAULT_ADDR: &str = "127.0.0.1:9567";

/// Ports after the default's tried when it is taken (another mount on
/// this machine has it), before any free port.
const DEFAULT_PORT_TRIES: u16 = 32;

/// Binds the metrics address: `addr` as given, or (None) the default,
/// moving on to the next ports and then to any free one when another mount
/// has it. An address that was asked for and cannot be had is an error.
pub fn bind(addr: Option<&str>) -> anyhow::Result<TcpListener> {
    if let Some(addr) = addr {
        return TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("--metrics {addr}: cannot listen there: {e}"));
    }
    let default: SocketAddr = DEFAULT_ADDR.parse().expect("valid default address");
    for step in 0..DEFAULT_PORT_TRIES {
        let mut at = default;
        at.set_port(default.port() + step);
        if let Ok(listener) = TcpListener::bind(at) {
            return Ok(listener);
        }
    }
    let mut any = default;
    any.set_port(0);
    TcpListener::bind(any).map_err(|e| anyhow::anyhow!("no port for the metrics on {any}: {e}"))
}

/// Connections served at once; more are closed at once (a scraper needs one).
const MAX_CONNECTIONS: usize = 16;

/// The longest a connection may take to send its request, and to stay.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves `/metrics` on `listener` until the runtime stops. Connections
/// are bounded in number and in time, so idle ones cannot use up the
/// mount's file descriptors.
pub fn serve(listener: TcpListener) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("metrics endpoint: accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(answer);
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(REQUEST_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service);
                // (a connection past its time is simply closed)
                if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                    tracing::debug!("metrics endpoint: {e}");
                }
                drop(slot);
            });
        }
    });
    Ok(())
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            super::text(),
        ),
        "/" => (
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "jfs mount: metrics at /metrics\n".to_string(),
        ),
        path => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            format!("{path}: not found; metrics are at /metrics\n"),
        ),
    };
    let response = Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response");
    Ok(response)
}
