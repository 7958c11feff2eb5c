//! The whole RSS configuration: key + hash types + RETA + queue -> CPU map,
//! and the one question the rest of flowsteer asks of it: where does this
//! packet go ([`RssConfig::place`]).

use crate::hashtype::{Fields, HashInput, HashTypes, MAX_INPUT_LEN};
use crate::key::RssKey;
use crate::reta::{rps_scale, CoreId, Mapping, QueueId, Reta};
use crate::toeplitz::{Impl, Toeplitz};
use flowsteer_wire::{FlowTuple, L3Info};

/// Where one packet lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub hash: u32,
    pub fields: Fields,
    /// The RETA entry used (`None` under [`Mapping::RpsScale`]).
    pub reta_index: Option<usize>,
    pub queue: QueueId,
    pub cpu: CoreId,
}

/// An RSS configuration. Immutable once built; cheap to share by reference.
#[derive(Clone, Debug)]
pub struct RssConfig {
    key: RssKey,
    hasher: Toeplitz,
    pub types: HashTypes,
    pub reta: Reta,
    pub mapping: Mapping,
    /// Queue `i` is served by `queue_cpus[i % len]`.
    queue_cpus: Vec<CoreId>,
}

impl RssConfig {
    /// `key`, `types` and `reta`; queue `i` on CPU `i`; RETA mapping; the
    /// fastest hash implementation.
    pub fn new(key: RssKey, types: HashTypes, reta: Reta) -> RssConfig {
        let hasher = Toeplitz::new(&key);
        let queue_cpus = (0..reta.queue_count().max(1) as u32).map(CoreId).collect();
        RssConfig { key, hasher, types, reta, mapping: Mapping::Reta, queue_cpus }
    }

    /// The Microsoft key, default hash types, a 128-entry RETA over `queues`.
    pub fn default_for_queues(queues: usize) -> Result<RssConfig, crate::reta::RetaError> {
        let reta = Reta::round_robin(crate::reta::DEFAULT_RETA_SIZE, queues)?;
        Ok(RssConfig::new(RssKey::microsoft(), HashTypes::default(), reta))
    }

    pub fn with_impl(mut self, imp: Impl) -> RssConfig {
        self.hasher = Toeplitz::with_impl(&self.key, imp);
        self
    }

    pub fn with_mapping(mut self, mapping: Mapping) -> RssConfig {
        self.mapping = mapping;
        self
    }

    /// Queue `i` -> `cpus[i % cpus.len()]`; an empty list keeps the identity map.
    pub fn with_queue_cpus(mut self, cpus: Vec<CoreId>) -> RssConfig {
        if !cpus.is_empty() {
            self.queue_cpus = cpus;
        }
        self
    }

    pub fn key(&self) -> &RssKey {
        &self.key
    }

    pub fn hasher(&self) -> &Toeplitz {
        &self.hasher
    }

    pub fn queue_count(&self) -> usize {
        self.reta.queue_count()
    }

    pub fn cpu_for(&self, queue: QueueId) -> CoreId {
        self.queue_cpus[usize::from(queue.0) % self.queue_cpus.len()]
    }

    /// The hash input for a packet under this configuration's hash types.
    #[inline]
    pub fn input_for(&self, tuple: &FlowTuple, is_fragment: bool) -> HashInput {
        self.types.input_for(tuple, is_fragment)
    }

    /// The hash of a parsed frame, read straight from the frame's bytes (the
    /// address pair sits contiguously in the IP header, the ports at the
    /// start of the L4 header), without building an intermediate tuple.
    /// Same result as `place(&l3.tuple, l3.frag.is_some()).hash`.
    #[inline]
    pub fn hash_frame(&self, frame: &[u8], l3: &L3Info) -> (u32, Fields) {
        let fields = self.types.fields_for(&l3.tuple, l3.frag.is_some());
        let (addr_off, addr_len) = if l3.tuple.src.is_ipv4() { (12, 8) } else { (8, 32) };
        let mut buf = [0u8; MAX_INPUT_LEN];
        let addrs = frame.get(l3.l3_offset + addr_off..l3.l3_offset + addr_off + addr_len);
        let len = match (fields, addrs) {
            (Fields::None, _) | (_, None) => return (0, Fields::None),
            (Fields::TwoTuple, Some(a)) => {
                buf[..addr_len].copy_from_slice(a);
                addr_len
            }
            (Fields::FourTuple, Some(a)) => {
                buf[..addr_len].copy_from_slice(a);
                match l3.l4_offset.and_then(|o| frame.get(o..o + 4)) {
                    Some(p) => buf[addr_len..addr_len + 4].copy_from_slice(p),
                    None => return (0, Fields::None),
                }
                addr_len + 4
            }
        };
        (self.hasher.hash(&buf[..len]), fields)
    }

    /// Hash, RETA entry, queue and CPU for one packet.
    #[inline]
    pub fn place(&self, tuple: &FlowTuple, is_fragment: bool) -> Placement {
        self.place_input(&self.input_for(tuple, is_fragment))
    }

    #[inline]
    pub fn place_input(&self, input: &HashInput) -> Placement {
        let hash = match input.fields() {
            Fields::None => 0,
            _ => self.hasher.hash(input.as_bytes()),
        };
        self.place_hash(hash, input.fields())
    }

    /// Placement of an already computed hash (a NIC-delivered one, say).
    #[inline]
    pub fn place_hash(&self, hash: u32, fields: Fields) -> Placement {
        let (reta_index, queue) = match self.mapping {
            Mapping::Reta => {
                let i = self.reta.index_for(hash);
                (Some(i), self.reta.entries()[i])
            }
            Mapping::RpsScale => {
                let n = self.queue_count().max(1) as u32;
                (None, QueueId(rps_scale(hash, n) as u16))
            }
        };
        Placement { hash, fields, reta_index, queue, cpu: self.cpu_for(queue) }
    }
}
