//! The control socket: a Unix stream socket (mode 0600) carrying one JSON
//! [`Request`](crate::Request) per line and one JSON
//! [`Response`](crate::Response) per line back.
