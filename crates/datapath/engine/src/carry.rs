//! Fragment bytes beside a descriptor ring (fragment policies `owner` and
//! `rehash`, where a worker other than the receiving core reassembles).
//!
//! Descriptors carry no bytes, so a fragment's frame travels in a bounded
//! channel paired with the descriptor ring from the same receive core to
//! the same worker: the bytes are sent first and the descriptor pushed at
//! once, so the worker finds them in the same order. The worker hands each
//! buffer back through a return channel and the receive core reuses it:
//! no allocation per fragment once warm, and no buffer freed on a thread
//! other than the one that allocated it (glibc's arena lock showed up as
//! futex wake-ups at 10 % of the receive core before this).
//!
//! Bounds: each direction holds at most the ring's capacity of buffers;
//! a full forward channel refuses the fragment (counted as `queue_full`
//! by the caller), a full return channel frees the buffer.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// The receive core's end.
pub struct CarryOut {
    tx: SyncSender<Vec<u8>>,
    back: Receiver<Vec<u8>>,
}

/// The worker's end.
pub struct CarryIn {
    rx: Receiver<Vec<u8>>,
    back: SyncSender<Vec<u8>>,
}

/// One link for `capacity` buffers in flight each way.
pub fn link(capacity: usize) -> (CarryOut, CarryIn) {
    let (tx, rx) = sync_channel(capacity);
    let (back_tx, back_rx) = sync_channel(capacity);
    (CarryOut { tx, back: back_rx }, CarryIn { rx, back: back_tx })
}

impl CarryOut {
    /// Sends a copy of `bytes` (in a recycled buffer when one came back);
    /// false when the channel is full.
    pub fn send(&self, bytes: &[u8]) -> bool {
        let mut buf = self.back.try_recv().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        self.tx.try_send(buf).is_ok()
    }
}

impl CarryIn {
    /// The next frame, if any.
    pub fn recv(&self) -> Option<Vec<u8>> {
        self.rx.try_recv().ok()
    }

    /// Returns a buffer for reuse (freed here when the return channel is full).
    pub fn give_back(&self, buf: Vec<u8>) {
        let _ = self.back.try_send(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_arrive_in_order_and_buffers_come_back() {
        let (out, inn) = link(2);
        assert!(out.send(b"one"));
        assert!(out.send(b"two"));
        assert!(!out.send(b"three"), "bounded");
        let a = inn.recv().unwrap();
        assert_eq!(a, b"one");
        let ptr = a.as_ptr();
        inn.give_back(a);
        assert_eq!(inn.recv().unwrap(), b"two");
        assert!(out.send(b"four"));
        let d = inn.recv().unwrap();
        assert_eq!(d, b"four");
        assert_eq!(d.as_ptr(), ptr, "the returned buffer was reused");
        assert!(inn.recv().is_none());
    }
}
