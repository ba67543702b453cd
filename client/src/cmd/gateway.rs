//! `jfs gateway`: serve the volume as an S3 endpoint (buckets are its
//! top-level directories), with a session of its own like a mount.
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::direct::{Direct, DirectOptions};
use crate::gateway::Gateway;
use crate::meta::redact_url;

#[derive(Args, Debug, Clone)]
pub struct GatewayArgs {
    /// PostgreSQL URL of the metadata database ("-" = from JFS_META_URL)
    meta_url: String,
    /// Address to serve S3 on (HOST:PORT, e.g. 127.0.0.1:9000)
    address: String,
    /// The access key clients sign requests with (SigV4)
    #[arg(long, env = "JFS_GATEWAY_ACCESS_KEY")]
    access_key: String,
    /// The secret key clients sign requests with. Give it in the
    /// environment (JFS_GATEWAY_SECRET_KEY): on the command line every
    /// local user sees it in `ps`
    #[arg(long, env = "JFS_GATEWAY_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
    /// Refuse every change
    #[arg(long)]
    read_only: bool,
    /// Serve this directory of the volume (its subdirectories are the buckets)
    #[arg(long)]
    subdir: Option<String>,
    /// Directory of a local block cache (off when not given)
    #[arg(long)]
    cache_dir: Option<std::path::PathBuf>,
    /// MiB the local block cache may hold
    #[arg(long, default_value_t = 10240)]
    cache_size: u64,
    /// MiB of memory for uploads in flight and recently read blocks
    #[arg(long, default_value_t = crate::attach::DEFAULT_BUFFER_MIB)]
    buffer_size: usize,
    /// Connections to PostgreSQL
    #[arg(long, default_value_t = crate::attach::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Seconds after which a multipart upload never completed nor aborted,
    /// and a file a gateway wrote aside and never placed (it crashed
    /// mid-PUT), are removed (0: never)
    #[arg(long, default_value_t = 7 * 24 * 3600)]
    upload_expiry: u64,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key): keys
    /// and data then do not cross the network in clear
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

pub fn run(a: GatewayArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !a.access_key.is_empty() && a.secret_key.len() >= 8,
        "give an access key and a secret key of at least 8 characters (--access-key, \
         JFS_GATEWAY_SECRET_KEY): every request must be signed with them"
    );
    let meta_url = match a.meta_url.as_str() {
        "-" => std::env::var("JFS_META_URL")
            .context("META_URL \"-\" needs JFS_META_URL in the environment")?,
        url => url.to_string(),
    };
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(crate::gateway::serve::tls_acceptor(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let rt = super::runtime()?;
    rt.block_on(async move {
        let options = DirectOptions {
            read_only: a.read_only,
            subdir: a.subdir.clone(),
            cache_dir: a.cache_dir.clone(),
            cache_mib: a.cache_size,
            buffer_mib: a.buffer_size,
            max_connections: a.max_connections,
            describe: format!("gateway {}", a.address),
            ..DirectOptions::default()
        };
        let direct = Arc::new(Direct::attach(&meta_url, &options).await?);
        let listener = tokio::net::TcpListener::bind(&a.address)
            .await
            .with_context(|| format!("listening on {}", a.address))?;
        let gateway = Gateway::new(direct.clone()).await?;
        if !a.read_only {
            gateway.spawn_expiry(std::time::Duration::from_secs(a.upload_expiry));
        }
        let mut service = s3s::service::S3ServiceBuilder::new(gateway);
        service.set_auth(s3s::auth::SimpleAuth::from_single(
            a.access_key.clone(),
            a.secret_key.clone(),
        ));
        let service = service.build();
        tracing::info!(
            "serving the volume of {} as S3 at {scheme}://{} (session {}; buckets are its \
             top-level directories)",
            redact_url(&meta_url),
            listener.local_addr()?,
            direct.session()
        );
        // (what scripts wait for, with the port an address of port 0 got)
        println!("S3 endpoint: {scheme}://{}", listener.local_addr()?);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        let cap = crate::gateway::serve::connection_cap();
        tracing::info!(
            "at most {cap} S3 connections (half the descriptor limit); a request's headers \
             within {} s",
            crate::gateway::serve::HEADER_TIMEOUT.as_secs()
        );
        crate::gateway::serve::serve(listener, service, cap, tls, stop).await;
        tracing::info!("signal received: closing the session");
        direct.close().await;
        Ok(())
    })
}
