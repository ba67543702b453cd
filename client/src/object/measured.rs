//! An object store that counts its requests in the metrics: each request's
//! latency and failures by operation, and the bytes put and got.
use std::future::Future;
use std::io;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectInfo, ObjectState, ObjectStore};
use crate::metrics::METRICS;

/// `inner`, measured.
pub struct Measured<S> {
    inner: S,
}

impl<S> Measured<S> {
    pub fn new(inner: S) -> Measured<S> {
        Measured { inner }
    }
}

/// Runs request `op`, recording how long it took and whether it failed.
async fn measure<T>(op: &str, request: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    let started = Instant::now();
    let result = request.await;
    METRICS
        .object_requests
        .with_label_values(&[op])
        .observe(started.elapsed().as_secs_f64());
    if result.is_err() {
        METRICS.object_errors.with_label_values(&[op]).inc();
    }
    result
}

/// A put of `len` bytes, timed and counted.
async fn measured_put(len: u64, put: impl Future<Output = io::Result<()>>) -> io::Result<()> {
    measure("put", put).await?;
    METRICS.object_bytes.with_label_values(&["put"]).inc_by(len);
    Ok(())
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Measured<S> {
    async fn put(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        let len = data.len() as u64;
        measured_put(len, self.inner.put(key, data, class)).await
    }

    async fn put_block(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        let len = data.len() as u64;
        measured_put(len, self.inner.put_block(key, data, class)).await
    }

    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes> {
        let data = measure("get", self.inner.get(key, off, len)).await?;
        METRICS
            .object_bytes
            .with_label_values(&["get"])
            .inc_by(data.len() as u64);
        Ok(data)
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        measure("delete", self.inner.delete(key)).await
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
        measure("list", self.inner.list(prefix)).await
    }

    async fn set_class(&self, key: &str, class: &str) -> io::Result<()> {
        measure("set_class", self.inner.set_class(key, class)).await
    }

    async fn head(&self, key: &str) -> io::Result<ObjectState> {
        measure("head", self.inner.head(key)).await
    }

    async fn restore(&self, key: &str) -> io::Result<bool> {
        measure("restore", self.inner.restore(key)).await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn disk_space(&self) -> Option<(u64, u64)> {
        self.inner.disk_space()
    }
}
