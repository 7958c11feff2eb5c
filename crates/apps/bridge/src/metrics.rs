//! Counters in the Prometheus text exposition format, served over HTTP.
