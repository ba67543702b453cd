//! OpenSSL across `fork()`: no child inherits a lock OpenSSL held at the fork.
//!
//! OpenSSL 3 keeps process-wide locks (its extra-data index, the default
//! library context) that building a context, starting, reading and freeing
//! a connection take for a moment. A process that forks while another of
//! its threads holds one (a Python program forking a DataLoader worker while
//! another thread attaches, or while a pool reconnects) leaves the child
//! with the lock held by a thread that does not exist there: its first TLS
//! context then waits forever. So every call this crate makes into OpenSSL
//! runs inside [`section`] (a shared lock), and a program that forks calls
//! [`hold_for_fork`] just before and [`release_after_fork`] just after (the
//! Python package registers them with `os.register_at_fork`): the fork then
//! happens while no thread is inside OpenSSL. Sections never wait for
//! anything but OpenSSL, so the hold is as short as the longest call.
use std::cell::RefCell;
use std::io;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::{Context, Poll};

use postgres_openssl::TlsStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::ChannelBinding;

/// Shared by every call into OpenSSL; taken whole by a fork.
static OPENSSL: RwLock<()> = RwLock::new(());

thread_local! {
    /// The hold of a fork in progress, from [`hold_for_fork`] to
    /// [`release_after_fork`] (in the thread that forks: the child's only
    /// thread is that one).
    static FORK_HOLD: RefCell<Option<RwLockWriteGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// Held while this thread is inside OpenSSL: no fork happens meanwhile.
pub(super) fn section() -> RwLockReadGuard<'static, ()> {
    OPENSSL.read().unwrap_or_else(|e| e.into_inner())
}

/// Waits until no thread is inside OpenSSL and keeps every thread out of it
/// until [`release_after_fork`]: call it just before `fork()`.
pub fn hold_for_fork() {
    let hold = OPENSSL.write().unwrap_or_else(|e| e.into_inner());
    FORK_HOLD.with(|held| *held.borrow_mut() = Some(hold));
}

/// Ends [`hold_for_fork`]'s hold: call it just after `fork()`, in the
/// parent and in the child (whose only thread is the one that forked).
pub fn release_after_fork() {
    FORK_HOLD.with(|held| held.borrow_mut().take());
}

/// An OpenSSL object whose drop (which frees it inside OpenSSL) runs in a
/// [`section`]. (Always Some but while it is dropped or taken.)
pub(super) struct Guarded<T>(Option<T>);

impl<T> Guarded<T> {
    pub(super) fn new(inner: T) -> Self {
        Guarded(Some(inner))
    }

    /// The object, whose drop is then the caller's to guard.
    pub(super) fn into_inner(mut self) -> T {
        self.0
            .take()
            .expect("a Guarded holds its object until dropped")
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            let _openssl = section();
            drop(inner);
        }
    }
}

impl<T> Deref for Guarded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("a Guarded holds its object until dropped")
    }
}

impl<T> DerefMut for Guarded<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("a Guarded holds its object until dropped")
    }
}

/// A TLS connection whose every read, write and drop runs in a [`section`].
pub struct GuardedStream<S>(Guarded<TlsStream<S>>);

impl<S> GuardedStream<S> {
    pub(super) fn new(stream: TlsStream<S>) -> Self {
        GuardedStream(Guarded::new(stream))
    }

    fn stream(self: Pin<&mut Self>) -> Pin<&mut TlsStream<S>>
    where
        S: Unpin,
    {
        Pin::new(&mut *self.get_mut().0)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for GuardedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let _openssl = section();
        self.stream().poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for GuardedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let _openssl = section();
        self.stream().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _openssl = section();
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _openssl = section();
        self.stream().poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for GuardedStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        let _openssl = section();
        self.0.channel_binding()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_fork_waits_for_the_threads_inside_openssl_and_keeps_others_out() {
        let inside = section();
        let (held, was_held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let forking = std::thread::spawn(move || {
            hold_for_fork();
            held.send(()).unwrap();
            released.recv().unwrap();
            release_after_fork();
        });
        assert!(
            was_held.recv_timeout(Duration::from_millis(100)).is_err(),
            "the hold began while a thread was inside OpenSSL"
        );
        drop(inside);
        was_held.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(
            OPENSSL.try_read().is_err(),
            "a section began during the hold"
        );
        release.send(()).unwrap();
        forking.join().unwrap();
        drop(section());
    }
}
