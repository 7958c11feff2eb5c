//! What the table refuses, and its capacity bound.

/// The largest value any capacity of [`FdbConfig`] may take.
pub const MAX_CAPACITY: usize = 1 << 24;

/// What the table refuses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FdbError {
    /// A capacity of the configuration is 0 or above [`MAX_CAPACITY`].
    BadCapacity(&'static str),
    /// An 802.1D reserved group address cannot be an entry.
    Reserved,
    /// A group or all-zeros address cannot be an entry.
    NotUnicast,
    /// `max_static` configured entries (static, sticky, external) exist.
    StaticFull,
    /// A learned entry cannot be added by hand (only static, sticky or external ones).
    NotConfigured,
}

impl std::fmt::Display for FdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FdbError::BadCapacity(what) => write!(f, "{what} must be between 1 and {MAX_CAPACITY}"),
            FdbError::Reserved => f.write_str("802.1D reserved group address (01:80:c2:00:00:00-0f)"),
            FdbError::NotUnicast => f.write_str("not a unicast address"),
            FdbError::StaticFull => {
                f.write_str("the limit of configured entries (static, sticky, extern_learn) is reached")
            }
            FdbError::NotConfigured => f.write_str("only static, sticky or extern_learn entries can be added"),
        }
    }
}

impl std::error::Error for FdbError {}
