//! The package's `os.register_at_fork` hooks: no fork happens while a thread
//! is inside OpenSSL (see `jfs_client::meta::tls_fork`).
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Registers [`before_fork`] and [`after_fork`] with `os.register_at_fork`.
pub fn register_hooks(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let hooks = PyDict::new(m.py());
    hooks.set_item("before", wrap_pyfunction!(before_fork, m)?)?;
    hooks.set_item("after_in_parent", wrap_pyfunction!(after_fork, m)?)?;
    hooks.set_item("after_in_child", wrap_pyfunction!(after_fork, m)?)?;
    m.py()
        .import("os")?
        .call_method("register_at_fork", (), Some(&hooks))?;
    Ok(())
}

/// Run by `os.fork()` before it forks: waits for the threads inside OpenSSL
/// (they never need the GIL) and keeps them out until [`after_fork`].
#[pyfunction]
fn before_fork() {
    jfs_client::meta::tls_fork::hold_for_fork();
}

/// Run by `os.fork()` after it forked, in the parent and in the child.
#[pyfunction]
fn after_fork() {
    jfs_client::meta::tls_fork::release_after_fork();
}
