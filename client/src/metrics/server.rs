//! The mount's Prometheus endpoint: `GET /metrics` over HTTP/1 (hyper).
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

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

/// Serves `/metrics` on `listener` until the runtime stops.
pub fn serve(listener: TcpListener) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("metrics endpoint: accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(answer);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!("metrics endpoint: {e}");
                }
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
