/*
 * reasm-dpdk: DPDK's IP reassembly library (rte_ip_frag) on exactly the
 * workload of `flowsteer bench reasm --set warm --delivery chain`
 * (crates/bench/harness/src/reasm.rs), so the two can be compared on one machine.
 *
 * Workload (identical frames, identical push order):
 *  - UDP datagrams (ports 4000 -> 5000) of a 4,416-byte payload, fragmented
 *    as Linux does at MTU 1500: IPv4 1,480-byte fragment payloads (3
 *    fragments), IPv6 1,448 (4 fragments, Fragment header right after the
 *    fixed header), in Ethernet frames; 65,507-byte payloads (45 / 46
 *    fragments) with 64 in flight as well.
 *  - Datagram i: IPv4 src 10.0.0.0 | (i >> 4), dst 192.0.2.1, id i & 0xf;
 *    IPv6 src 2001:db8:: | i, dst 2001:db8::1, id i (flowsteer's datagram()).
 *  - "In flight" block pattern: fragment k of datagrams i..i+in_flight
 *    round-robin, then fragment k+1...; the order of the fragments within a
 *    datagram is forward, reversed or shuffled (Fisher-Yates with
 *    flowsteer's SplitMix64 generator, seeded and advanced as flowsteer's
 *    warm run does, so the shuffled permutations are the same).
 *  - Warm set: 2 blocks of in_flight datagrams, replayed round after round;
 *    a (src, dst, id) comes back only in a later round, after the earlier
 *    datagram completed.
 *
 * What is timed (and what is not): per block of in_flight datagrams, one
 * clock read (CLOCK_MONOTONIC, also the block's `tms` timestamp for DPDK)
 * before its first fragment and one after its last. In between, and only
 * that: computing the IP header pointer of each mbuf, the
 * rte_ipv4/ipv6_frag_reassemble_packet() calls, the prefetch of the packet
 * data PREFETCH_OFFSET packets ahead and rte_ip_frag_free_death_row() after
 * every burst of 32 fragments (exactly the loop of DPDK's
 * examples/ip_reassembly: bursts of MAX_PKT_BURST = 32, PREFETCH_OFFSET = 3),
 * and the handling of each delivered datagram: count it, check its pkt_len
 * (Ethernet header + the expected IP length), read its IP header's first
 * bytes (version, length) as a consumer would, and note the head mbuf for
 * the restoration below.
 *
 * Not timed: building the frames (before the case starts), setting the
 * mbufs' l2_len / l3_len (the caller's parse, as in DPDK's
 * app/test/test_reassembly_perf.c, which also times only the reassemble
 * calls), and the restoration between blocks: DPDK consumes its input
 * mbufs (it chains them, moves data_off and rewrites the first fragment's
 * header; IPv6 even moves the header 8 bytes up over the Fragment header),
 * so after each block every mbuf of the delivered chains is reset
 * (rte_pktmbuf_reset, lengths, l2/l3_len) and its header bytes copied back
 * from a saved copy; the payload bytes are never written by DPDK. An mbuf
 * that did not come back (dropped to the death row and freed, or still held
 * by the table) is replaced by a fresh one from the pool, rebuilt in full.
 *
 * Rates: datagrams delivered / timed seconds, and timed ns / fragment.
 * Each case: one untimed warm-up round, which must deliver every datagram
 * with the right length and bytes (else the case is reported as
 * incomplete and not timed), then 3 repetitions of about --seconds of
 * timed work; the median (by datagrams/s) is reported, as flowsteer does.
 * At the end of each case the table is destroyed and the pool must be full
 * again: any mbuf leak is an error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>
#include <rte_version.h>

#define ETH_LEN 14
#define V4_HDR 20
#define V6_HDR 40
#define V6_FRAG_HDR 8
#define UDP_HDR 8
/* Fragment payload sizes at MTU 1500 (flowsteer's V4_FRAG / V6_FRAG). */
#define V4_FRAG 1480
#define V6_FRAG 1448
#define SMALL 4416
#define LARGE 65507
#define WARM_BLOCKS 2
#define REPS 3
#define SPORT 4000
#define DPORT 5000
#define HOPS 64
/* examples/ip_reassembly: MAX_PKT_BURST and PREFETCH_OFFSET. */
#define BURST 32
#define PREFETCH_OFFSET 3
/* Saved header bytes per fragment (Ethernet + IPv6 + Fragment = 62). */
#define HDR_COPY 64
/* flowsteer's SplitMix64 seed in reasm.rs (flowsteer-bench) and the generator's step. */
#define RNG_SEED 0x5eed4ea500000001ULL
#define RNG_GAMMA 0x9e3779b97f4a7c15ULL
#define NSEC_PER_SEC 1000000000ULL
/* Largest frame built: Ethernet + IPv6 + Fragment header + 1,448. */
#define FRAME_MAX 1600

enum order { ORDER_FORWARD, ORDER_REVERSED, ORDER_SHUFFLED, ORDER_COUNT };
/* flowsteer's Order::name strings. */
static const char *const order_names[ORDER_COUNT] = {"in-order", "reversed", "shuffled"};

static const uint8_t dst_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t src_mac[6] = {0x02, 0, 0, 0, 0, 0x01};

/* ---------------------------------------------------------------- shapes */

struct shape {
	char name[48];
	const char *role; /* "example", "perftest", "sweep", "custom" */
	uint32_t buckets, entries, max_entries;
	uint64_t ttl_ns;
};

/*
 * Entries (256 bytes each) rte_ip_frag_table_create allocates: bucket_num
 * rounded up to a power of two, times bucket_entries, times 2 (each key
 * has two candidate buckets). max_entries may not exceed it.
 */
static uint64_t shape_capacity(const struct shape *s)
{
	return (uint64_t)rte_align32pow2(s->buckets) * s->entries * 2;
}

static void shape_name(struct shape *s)
{
	if (s->max_entries == s->buckets * s->entries)
		snprintf(s->name, sizeof(s->name), "bkt%ux%u", s->buckets, s->entries);
	else
		snprintf(s->name, sizeof(s->name), "bkt%ux%u/max%u", s->buckets, s->entries,
			 s->max_entries);
}

/*
 * (a) examples/ip_reassembly: rte_ip_frag_table_create(max_flow_num,
 *     IP_FRAG_TBL_BUCKET_ENTRIES = 16, max_flow_num, 1 s), max_flow_num
 *     defaulting to DEF_FLOW_NUM = 0x1000 and the TTL to MS_PER_S ms.
 * (b) app/test/test_reassembly_perf.c (DPDK 23.07+): MAX_BKTS = 32768
 *     buckets, MAX_ENTRIES_PER_BKT = 16, max_entries 32768 * 16, 5 s TTL.
 */
static const struct shape shape_example = {"", "example", 4096, 16, 4096, NSEC_PER_SEC};
static const struct shape shape_perftest = {"", "perftest", 32768, 16, 32768 * 16, 5 * NSEC_PER_SEC};
/* (c) the sweep: max_entries = buckets * entries, the example's 1 s TTL. */
static const uint32_t sweep_buckets[] = {16, 64, 256, 1024, 4096, 16384};
static const uint32_t sweep_entries[] = {1, 2, 4, 8, 16};

/* ------------------------------------------------------------- workload */

struct workload {
	int family;            /* 4 or 6 */
	uint32_t payload;      /* UDP payload bytes */
	uint32_t in_flight;
	enum order order;
	uint32_t frag_size;    /* fragment payload bytes (the last one is shorter) */
	uint32_t frags;        /* fragments per datagram */
	uint32_t udp_len;      /* UDP header + payload */
	uint32_t ip_len;       /* length of the reassembled IP packet */
	uint32_t l3_len;       /* IP header (+ Fragment header) of a fragment */
	uint32_t dgrams;       /* datagrams in the set */
	uint32_t block_pushes; /* fragments per block */
	uint32_t pushes;       /* fragments in the set */
	uint64_t rng_skip;     /* generator draws before this case in flowsteer's run */
	uint8_t *payload_bytes;
	uint64_t payload_sum;  /* unfolded checksum sum of the payload */
	/* Per fragment slot, in push order. */
	uint32_t *slot_dgram;
	uint8_t *slot_frag;
	uint16_t *frame_len;
	uint8_t (*hdr)[HDR_COPY];
};

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* Sum of big-endian 16-bit words, an odd last byte padded with zero. */
static uint64_t sum16(const uint8_t *d, size_t n, uint64_t acc)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		acc += (uint64_t)d[i] << 8 | d[i + 1];
	if (n & 1)
		acc += (uint64_t)d[n - 1] << 8;
	return acc;
}

/* Folds with end-around carry and complements (flowsteer's fold). */
static uint16_t fold(uint64_t acc)
{
	while (acc > 0xffff)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint16_t)~acc;
}

/* Addresses of datagram i, as flowsteer's datagram() builds them. */
static void addrs(const struct workload *w, uint32_t i, uint8_t src[16], uint8_t dst[16])
{
	memset(src, 0, 16);
	memset(dst, 0, 16);
	if (w->family == 4) {
		put32(src, 0x0a000000u | (i >> 4));
		put32(dst, 0xc0000201u); /* 192.0.2.1 */
	} else {
		put16(src, 0x2001);
		put16(src + 2, 0x0db8);
		put32(src + 12, i);
		put16(dst, 0x2001);
		put16(dst + 2, 0x0db8);
		dst[15] = 1;
	}
}

/* The UDP header of datagram i, checksum over the pseudo header included. */
static void udp_header(const struct workload *w, uint32_t i, uint8_t out[UDP_HDR])
{
	uint8_t src[16], dst[16];
	uint64_t acc;
	uint16_t c;

	addrs(w, i, src, dst);
	if (w->family == 4)
		acc = sum16(dst, 4, sum16(src, 4, 0));
	else
		acc = sum16(dst, 16, sum16(src, 16, 0));
	acc += IPPROTO_UDP + (w->udp_len >> 16) + (w->udp_len & 0xffff);
	put16(out, SPORT);
	put16(out + 2, DPORT);
	put16(out + 4, w->udp_len);
	put16(out + 6, 0);
	acc = sum16(out, UDP_HDR, acc) + w->payload_sum;
	c = fold(acc);
	put16(out + 6, c ? c : 0xffff);
}

/*
 * Writes fragment `frag` of datagram `dgram` (an Ethernet frame, as
 * flowsteer's ipv4_fragments / ipv6_fragments build it) to `out`; returns
 * its length.
 */
static uint32_t build_fragment(const struct workload *w, uint32_t dgram, uint32_t frag, uint8_t *out)
{
	uint8_t src[16], dst[16], udp[UDP_HDR];
	uint32_t off = frag * w->frag_size;
	uint32_t len = RTE_MIN(w->frag_size, w->udp_len - off);
	bool more = off + len < w->udp_len;
	uint8_t *ip = out + ETH_LEN, *data;
	uint32_t k;

	addrs(w, dgram, src, dst);
	udp_header(w, dgram, udp);
	memcpy(out, dst_mac, 6);
	memcpy(out + 6, src_mac, 6);
	if (w->family == 4) {
		put16(out + 12, RTE_ETHER_TYPE_IPV4);
		ip[0] = 0x45;
		ip[1] = 0;
		put16(ip + 2, len + V4_HDR);
		put16(ip + 4, dgram & 0xf);
		put16(ip + 6, ((off / 8) & 0x1fff) | (more ? 0x2000 : 0));
		ip[8] = HOPS;
		ip[9] = IPPROTO_UDP;
		put16(ip + 10, 0);
		memcpy(ip + 12, src, 4);
		memcpy(ip + 16, dst, 4);
		put16(ip + 10, fold(sum16(ip, V4_HDR, 0)));
		data = ip + V4_HDR;
	} else {
		put16(out + 12, RTE_ETHER_TYPE_IPV6);
		put32(ip, 6u << 28);
		put16(ip + 4, V6_FRAG_HDR + len);
		ip[6] = IPPROTO_FRAGMENT;
		ip[7] = HOPS;
		memcpy(ip + 8, src, 16);
		memcpy(ip + 24, dst, 16);
		ip[40] = IPPROTO_UDP;
		ip[41] = 0;
		put16(ip + 42, (off & 0xfff8) | (more ? 1 : 0));
		put32(ip + 44, dgram);
		data = ip + V6_HDR + V6_FRAG_HDR;
	}
	/* Bytes off..off+len of the UDP datagram: header, then payload. */
	for (k = 0; k < len && off + k < UDP_HDR; k++)
		data[k] = udp[off + k];
	if (k < len)
		memcpy(data + k, w->payload_bytes + (off + k - UDP_HDR), len - k);
	return ETH_LEN + w->l3_len + len;
}

struct splitmix {
	uint64_t state;
};

static uint64_t splitmix_next(struct splitmix *r)
{
	uint64_t z;

	r->state += RNG_GAMMA;
	z = r->state;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* flowsteer's permutation(): the fragment order of one datagram. */
static void permutation(uint8_t *p, uint32_t n, enum order o, struct splitmix *rng)
{
	uint32_t i, j;
	uint8_t t;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(o == ORDER_REVERSED ? n - 1 - i : i);
	if (o != ORDER_SHUFFLED)
		return;
	for (i = n - 1; i >= 1; i--) {
		j = (uint32_t)(splitmix_next(rng) % (i + 1));
		t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
}

static void workload_free(struct workload *w)
{
	free(w->payload_bytes);
	free(w->slot_dgram);
	free(w->slot_frag);
	free(w->frame_len);
	free(w->hdr);
	memset(w, 0, sizeof(*w));
}

/*
 * Lays out the set: slot s of block b holds, at s = b * block_pushes +
 * k * in_flight + d, position k of datagram b * in_flight + d's
 * permutation (flowsteer's interleave()), and saves each fragment's header.
 */
static int workload_init(struct workload *w, int family, uint32_t payload, uint32_t in_flight,
			 enum order order, uint64_t rng_skip)
{
	struct splitmix rng = {RNG_SEED + rng_skip * RNG_GAMMA};
	uint8_t frame[FRAME_MAX];
	uint8_t *perm = NULL;
	uint32_t b, d, k, i;

	memset(w, 0, sizeof(*w));
	w->family = family;
	w->payload = payload;
	w->in_flight = in_flight;
	w->order = order;
	w->rng_skip = rng_skip;
	w->udp_len = UDP_HDR + payload;
	w->frag_size = family == 4 ? V4_FRAG : V6_FRAG;
	w->l3_len = family == 4 ? V4_HDR : V6_HDR + V6_FRAG_HDR;
	w->ip_len = w->udp_len + (family == 4 ? V4_HDR : V6_HDR);
	w->frags = (w->udp_len + w->frag_size - 1) / w->frag_size;
	w->dgrams = WARM_BLOCKS * in_flight;
	w->block_pushes = in_flight * w->frags;
	w->pushes = WARM_BLOCKS * w->block_pushes;
	w->payload_bytes = malloc(payload);
	w->slot_dgram = calloc(w->pushes, sizeof(*w->slot_dgram));
	w->slot_frag = calloc(w->pushes, sizeof(*w->slot_frag));
	w->frame_len = calloc(w->pushes, sizeof(*w->frame_len));
	w->hdr = calloc(w->pushes, sizeof(*w->hdr));
	perm = calloc((size_t)in_flight * w->frags, 1);
	if (!w->payload_bytes || !w->slot_dgram || !w->slot_frag || !w->frame_len || !w->hdr || !perm) {
		fprintf(stderr, "reasm-dpdk: out of memory building the frame set\n");
		free(perm);
		workload_free(w);
		return -1;
	}
	for (i = 0; i < payload; i++)
		w->payload_bytes[i] = (uint8_t)(i * 7);
	w->payload_sum = sum16(w->payload_bytes, payload, 0);
	for (b = 0; b < WARM_BLOCKS; b++) {
		/* All permutations of the block first, in datagram order. */
		for (d = 0; d < in_flight; d++)
			permutation(perm + (size_t)d * w->frags, w->frags, order, &rng);
		for (k = 0; k < w->frags; k++) {
			for (d = 0; d < in_flight; d++) {
				uint32_t s = b * w->block_pushes + k * in_flight + d;

				w->slot_dgram[s] = b * in_flight + d;
				w->slot_frag[s] = perm[(size_t)d * w->frags + k];
				w->frame_len[s] = (uint16_t)build_fragment(w, w->slot_dgram[s], w->slot_frag[s], frame);
				memcpy(w->hdr[s], frame, HDR_COPY);
			}
		}
	}
	free(perm);
	return 0;
}

/* ------------------------------------------------------------ one run */

struct tally {
	uint64_t pushes, completed, legit, bad_len, dropped, hdr_sum;
};

struct run {
	const struct workload *w;
	const struct shape *s;
	struct rte_mempool *pool;
	struct rte_ip_frag_tbl *tbl;
	struct rte_mbuf **mb;        /* per slot */
	struct rte_mbuf **delivered; /* heads delivered in the current block */
	uint32_t n_delivered;
	uint32_t *seen;              /* per slot: epoch it came back in */
	uint32_t epoch;
	uint32_t prefetch;
	uint8_t *scratch;            /* reassembled packet copy (verification) */
	uint64_t lost, orphans, verify_errors;
	struct rte_ip_frag_death_row dr;
};

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static inline uint32_t *slot_of(struct rte_mbuf *m)
{
	return rte_mbuf_to_priv(m);
}

/*
 * The timed part: one block's fragments, in bursts of BURST as
 * examples/ip_reassembly's main loop handles an rx burst (prefetch
 * `prefetch` packets ahead, reassemble, free the death row at the end of
 * the burst).
 */
static inline __attribute__((always_inline)) void
reasm_block(struct run *r, const int v4, uint32_t start, uint32_t end, uint64_t tms, struct tally *t)
{
	struct rte_ip_frag_tbl *tbl = r->tbl;
	struct rte_ip_frag_death_row *dr = &r->dr;
	struct rte_mbuf **delivered = r->delivered;
	const uint32_t want = ETH_LEN + r->w->ip_len;
	const uint32_t pf = r->prefetch;
	uint64_t completed = 0, bad = 0, hsum = 0, dropped = 0;
	uint32_t nd = r->n_delivered;
	uint32_t blk, j, n;

	for (blk = start; blk < end; blk += BURST) {
		struct rte_mbuf **pk = r->mb + blk;

		n = RTE_MIN((uint32_t)BURST, end - blk);
		for (j = 0; j < pf && j < n; j++)
			rte_prefetch0(rte_pktmbuf_mtod(pk[j], void *));
		for (j = 0; j < n; j++) {
			struct rte_mbuf *m = pk[j], *out;

			if (pf != 0 && j + pf < n)
				rte_prefetch0(rte_pktmbuf_mtod(pk[j + pf], void *));
			if (v4) {
				out = rte_ipv4_frag_reassemble_packet(
					tbl, dr, m, tms, rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, ETH_LEN));
			} else {
				struct rte_ipv6_hdr *ip6 =
					rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, ETH_LEN);

				out = rte_ipv6_frag_reassemble_packet(tbl, dr, m, tms, ip6,
								      (struct rte_ipv6_fragment_ext *)(ip6 + 1));
			}
			if (out != NULL) {
				const uint8_t *h = rte_pktmbuf_mtod_offset(out, const uint8_t *, out->l2_len);

				completed++;
				bad += out->pkt_len != want;
				/* Read the header as a consumer would (version, length). */
				hsum += (uint64_t)h[0] + h[3];
				delivered[nd++] = out;
			}
		}
		dropped += dr->cnt;
		rte_ip_frag_free_death_row(dr, PREFETCH_OFFSET);
	}
	r->n_delivered = nd;
	t->pushes += end - start;
	t->completed += completed;
	t->bad_len += bad;
	t->hdr_sum += hsum;
	t->dropped += dropped;
}

static void reasm_block_v4(struct run *r, uint32_t s, uint32_t e, uint64_t tms, struct tally *t)
{
	reasm_block(r, 1, s, e, tms, t);
}

static void reasm_block_v6(struct run *r, uint32_t s, uint32_t e, uint64_t tms, struct tally *t)
{
	reasm_block(r, 0, s, e, tms, t);
}

/* Puts slot s's fragment, as built, into m (a fresh or reset mbuf). */
static void fill_slot(struct run *r, uint32_t s, struct rte_mbuf *m)
{
	const struct workload *w = r->w;
	uint32_t len = build_fragment(w, w->slot_dgram[s], w->slot_frag[s], rte_pktmbuf_mtod(m, uint8_t *));

	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	m->l2_len = ETH_LEN;
	m->l3_len = w->l3_len;
	*slot_of(m) = s;
	r->mb[s] = m;
}

/*
 * Back to the state before the reassembler saw it: DPDK only moved
 * data_off, changed the lengths and chain links, and rewrote bytes of the
 * first ETH_LEN + l3_len (IPv6: the header moved over the Fragment
 * header), so the saved header bytes and a reset are enough.
 */
static void restore_slot(struct run *r, uint32_t s, struct rte_mbuf *m)
{
	const struct workload *w = r->w;

	rte_pktmbuf_reset(m);
	memcpy(rte_pktmbuf_mtod(m, uint8_t *), w->hdr[s], HDR_COPY);
	m->data_len = w->frame_len[s];
	m->pkt_len = w->frame_len[s];
	m->l2_len = ETH_LEN;
	m->l3_len = w->l3_len;
}

/* Warm-up check of one delivered datagram: headers and every byte. */
static void verify_datagram(struct run *r, struct rte_mbuf *d)
{
	const struct workload *w = r->w;
	uint32_t dgram = w->slot_dgram[*slot_of(d)];
	uint8_t src[16], dst[16], udp[UDP_HDR];
	const uint8_t *p, *ip, *seg;
	bool ok;

	if (d->pkt_len != ETH_LEN + w->ip_len || d->nb_segs != w->frags) {
		r->verify_errors++;
		return;
	}
	p = rte_pktmbuf_read(d, 0, d->pkt_len, r->scratch);
	if (p == NULL) {
		r->verify_errors++;
		return;
	}
	addrs(w, dgram, src, dst);
	udp_header(w, dgram, udp);
	ip = p + ETH_LEN;
	if (w->family == 4) {
		ok = ip[0] == 0x45 && (uint32_t)(ip[2] << 8 | ip[3]) == w->ip_len && ip[6] == 0 &&
		     ip[7] == 0 && ip[9] == IPPROTO_UDP && memcmp(ip + 12, src, 4) == 0 &&
		     memcmp(ip + 16, dst, 4) == 0;
		seg = ip + V4_HDR;
	} else {
		ok = ip[0] >> 4 == 6 && (uint32_t)(ip[4] << 8 | ip[5]) == w->udp_len &&
		     ip[6] == IPPROTO_UDP && memcmp(ip + 8, src, 16) == 0 && memcmp(ip + 24, dst, 16) == 0;
		seg = ip + V6_HDR;
	}
	ok = ok && memcmp(p, dst_mac, 6) == 0 && memcmp(seg, udp, UDP_HDR) == 0 &&
	     memcmp(seg + UDP_HDR, w->payload_bytes, w->payload) == 0;
	if (!ok)
		r->verify_errors++;
}

/*
 * After a block (not timed): give every mbuf of the delivered chains back
 * to its slot, reset; replace the slots whose mbuf did not come back (DPDK
 * dropped it to the death row, already freed, or still holds it) with a
 * fresh one. A chain segment that is no longer its slot's mbuf (one given
 * up as lost in an earlier round and delivered now) goes back to the pool.
 * Returns -1 if the pool ran dry.
 */
static int settle_block(struct run *r, uint32_t start, uint32_t end, bool verify)
{
	uint32_t i, s;

	r->epoch++;
	for (i = 0; i < r->n_delivered; i++) {
		struct rte_mbuf *seg = r->delivered[i], *next;

		if (verify)
			verify_datagram(r, seg);
		for (; seg != NULL; seg = next) {
			next = seg->next;
			s = *slot_of(seg);
			if (s >= start && s < end && r->mb[s] == seg && r->seen[s] != r->epoch) {
				r->seen[s] = r->epoch;
				restore_slot(r, s, seg);
			} else {
				seg->next = NULL;
				seg->nb_segs = 1;
				rte_pktmbuf_free_seg(seg);
				r->orphans++;
			}
		}
	}
	r->n_delivered = 0;
	for (s = start; s < end; s++) {
		struct rte_mbuf *m;

		if (r->seen[s] == r->epoch)
			continue;
		r->lost++;
		m = rte_pktmbuf_alloc(r->pool);
		if (m == NULL) {
			fprintf(stderr, "reasm-dpdk: mbuf pool exhausted replacing dropped fragments\n");
			/*
			 * The slots not replaced yet point at mbufs DPDK freed or
			 * holds (the table's destruction frees those): forget them.
			 */
			for (; s < end; s++)
				if (r->seen[s] != r->epoch)
					r->mb[s] = NULL;
			return -1;
		}
		fill_slot(r, s, m);
	}
	return 0;
}

/* ------------------------------------------------------------ results */

struct row {
	int family;
	uint32_t payload, fragments, in_flight;
	const char *order;
	char shape[48];
	const char *role;
	uint32_t buckets, entries, max_entries;
	double dgrams_per_s, ns_per_frag, completed_share;
	uint64_t frags_dropped; /* warm-up round: fragments DPDK dropped */
	bool ok;
	char note[160];
};

struct opts {
	double seconds;
	unsigned cpu;
	bool json, verbose;
	uint32_t prefetch;
	unsigned mem_mb;
	int family;        /* 0: both */
	uint32_t in_flight; /* 0: both */
	int order;         /* -1: all */
	uint32_t payload;  /* 0: both */
	int dump_frames;   /* > 0: print frames and exit */
};

static int fail_status; /* exit status for harness-level failures */

/*
 * Mbufs the pool needs: the set, plus what the table may hold of datagrams
 * whose mbufs were replaced (at most one entry per key, each up to
 * RTE_LIBRTE_IP_FRAG_MAX_FRAG fragments), plus a full death row.
 */
static uint32_t pool_size(const struct workload *w, const struct shape *s)
{
	uint64_t entries = RTE_MIN((uint64_t)w->dgrams, (uint64_t)s->max_entries);
	uint64_t held = entries * RTE_MIN(w->frags, (uint32_t)RTE_LIBRTE_IP_FRAG_MAX_FRAG);

	return (uint32_t)(w->pushes + held + RTE_IP_FRAG_DEATH_ROW_MBUF_LEN + BURST);
}

static void run_free(struct run *r)
{
	uint32_t s;

	if (r->mb != NULL) {
		for (s = 0; s < r->w->pushes; s++)
			if (r->mb[s] != NULL)
				rte_pktmbuf_free(r->mb[s]);
	}
	if (r->tbl != NULL) {
		rte_ip_frag_free_death_row(&r->dr, 0);
		/* Frees the mbufs of the datagrams still pending. */
		rte_ip_frag_table_destroy(r->tbl);
	}
	rte_ip_frag_free_death_row(&r->dr, 0);
	free(r->mb);
	free(r->delivered);
	free(r->seen);
	free(r->scratch);
	r->mb = NULL;
	r->tbl = NULL;
}

static int cmp_rate(const void *a, const void *b)
{
	const double *x = a, *y = b;

	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* One case on one table shape: warm-up, REPS timed repetitions. */
static int run_case(const struct workload *w, const struct shape *s, const struct opts *o, struct row *row)
{
	static unsigned pool_seq;
	void (*block)(struct run *, uint32_t, uint32_t, uint64_t, struct tally *) =
		w->family == 4 ? reasm_block_v4 : reasm_block_v6;
	const uint32_t nblocks = WARM_BLOCKS;
	struct run r;
	struct tally warm = {0};
	double samples[REPS][3];
	char name[RTE_MEMPOOL_NAMESIZE];
	uint32_t b, s_i, seg = 0, npool;
	int rc = -1, rep;

	memset(&r, 0, sizeof(r));
	memset(row, 0, sizeof(*row));
	row->family = w->family;
	row->payload = w->payload;
	row->fragments = w->frags;
	row->in_flight = w->in_flight;
	row->order = order_names[w->order];
	snprintf(row->shape, sizeof(row->shape), "%s", s->name);
	row->role = s->role;
	row->buckets = s->buckets;
	row->entries = s->entries;
	row->max_entries = s->max_entries;
	row->dgrams_per_s = 0;
	row->ns_per_frag = NAN;

	r.w = w;
	r.s = s;
	r.prefetch = o->prefetch;
	npool = pool_size(w, s);
	snprintf(name, sizeof(name), "reasm%u", pool_seq++);
	/* 8 bytes of private area per mbuf: the slot index. */
	r.pool = rte_pktmbuf_pool_create(name, npool, 0, 8, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (r.pool == NULL) {
		fprintf(stderr, "reasm-dpdk: rte_pktmbuf_pool_create(%u mbufs): %s (raise --mem)\n", npool,
			rte_strerror(rte_errno));
		fail_status = 2;
		return -1;
	}
	r.tbl = rte_ip_frag_table_create(s->buckets, s->entries, s->max_entries, s->ttl_ns, (int)rte_socket_id());
	r.mb = calloc(w->pushes, sizeof(*r.mb));
	r.delivered = calloc(w->block_pushes, sizeof(*r.delivered));
	r.seen = calloc(w->pushes, sizeof(*r.seen));
	r.scratch = malloc(ETH_LEN + w->ip_len);
	if (r.tbl == NULL || r.mb == NULL || r.delivered == NULL || r.seen == NULL || r.scratch == NULL) {
		fprintf(stderr, "reasm-dpdk: %s: cannot create the table (%" PRIu64 " entries of 256 B) or "
			"the run's arrays (raise --mem)\n", s->name, shape_capacity(s));
		fail_status = 2;
		goto out;
	}
	for (s_i = 0; s_i < w->pushes; s_i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(r.pool);

		if (m == NULL) {
			fprintf(stderr, "reasm-dpdk: mbuf pool too small\n");
			fail_status = 2;
			goto out;
		}
		fill_slot(&r, s_i, m);
	}

	/* Warm-up: one round, untimed; every datagram must come out whole. */
	for (b = 0; b < nblocks; b++) {
		block(&r, b * w->block_pushes, (b + 1) * w->block_pushes, now_ns(), &warm);
		warm.legit += w->in_flight;
		if (settle_block(&r, b * w->block_pushes, (b + 1) * w->block_pushes, true) != 0) {
			fail_status = 2;
			goto out;
		}
	}
	sink += warm.hdr_sum;
	row->frags_dropped = warm.dropped;
	row->completed_share = (double)warm.completed / (double)warm.legit;
	if (warm.bad_len != 0 || r.verify_errors != 0) {
		fprintf(stderr, "reasm-dpdk: %s IPv%d %u B %u in flight %s: %" PRIu64 " datagrams of the wrong "
			"length, %" PRIu64 " failed the byte check\n", s->name, w->family, w->payload,
			w->in_flight, row->order, warm.bad_len, r.verify_errors);
		snprintf(row->note, sizeof(row->note), "wrong reassembled datagrams");
		fail_status = 2;
		rc = 0;
		goto out;
	}
	if (warm.completed != warm.legit) {
		if (w->frags > RTE_LIBRTE_IP_FRAG_MAX_FRAG)
			snprintf(row->note, sizeof(row->note),
				 "cannot: %u fragments > RTE_LIBRTE_IP_FRAG_MAX_FRAG %d; %" PRIu64
				 " of %" PRIu64 " completed, %" PRIu64 " fragments dropped",
				 w->frags, RTE_LIBRTE_IP_FRAG_MAX_FRAG, warm.completed, warm.legit, warm.dropped);
		else
			snprintf(row->note, sizeof(row->note),
				 "table too small: %" PRIu64 " of %" PRIu64 " completed, %" PRIu64
				 " fragments dropped (table full or both buckets full)",
				 warm.completed, warm.legit, warm.dropped);
		fprintf(stderr, "reasm-dpdk: %s IPv%d %u B %u in flight %s: INCOMPLETE, not timed: %s\n",
			s->name, w->family, w->payload, w->in_flight, row->order, row->note);
		/* DPDK's own shapes must do every case its build allows. */
		if (strcmp(s->role, "sweep") != 0 && strcmp(s->role, "custom") != 0 &&
		    w->frags <= RTE_LIBRTE_IP_FRAG_MAX_FRAG)
			fail_status = 2;
		rc = 0;
		goto out;
	}

	for (rep = 0; rep < REPS; rep++) {
		struct tally t = {0};
		uint64_t timed = 0, budget = (uint64_t)(o->seconds * 1e9);

		while (timed < budget) {
			uint64_t t0 = now_ns(), t1;

			block(&r, seg * w->block_pushes, (seg + 1) * w->block_pushes, t0, &t);
			t1 = now_ns();
			timed += t1 - t0;
			t.legit += w->in_flight;
			if (settle_block(&r, seg * w->block_pushes, (seg + 1) * w->block_pushes, false) != 0) {
				fail_status = 2;
				goto out;
			}
			seg = (seg + 1) % nblocks;
		}
		sink += t.hdr_sum;
		if (t.bad_len != 0 || r.lost != 0 || t.completed != t.legit) {
			fprintf(stderr, "reasm-dpdk: %s IPv%d %u in flight %s: in the timed run %" PRIu64
				" of %" PRIu64 " completed, %" PRIu64 " wrong length, %" PRIu64 " fragments lost\n",
				s->name, w->family, w->in_flight, row->order, t.completed, t.legit, t.bad_len, r.lost);
			snprintf(row->note, sizeof(row->note), "datagrams lost in the timed run");
			fail_status = 2;
			rc = 0;
			goto out;
		}
		samples[rep][0] = (double)t.completed * 1e9 / (double)timed;
		samples[rep][1] = (double)timed / (double)t.pushes;
		samples[rep][2] = (double)t.completed / (double)t.legit;
	}
	qsort(samples, REPS, sizeof(samples[0]), cmp_rate);
	if (o->verbose)
		fprintf(stderr, "reasm-dpdk: %s IPv%d %u B %u %s: repetitions %.0f %.0f %.0f dgrams/s\n", s->name,
			w->family, w->payload, w->in_flight, row->order, samples[0][0], samples[1][0], samples[2][0]);
	row->dgrams_per_s = samples[REPS / 2][0];
	row->ns_per_frag = samples[REPS / 2][1];
	row->completed_share = samples[REPS / 2][2];
	row->ok = true;
	rc = 0;
out:
	run_free(&r);
	/* Everything handed to DPDK must be back in the pool. */
	if (r.pool != NULL) {
		unsigned avail = rte_mempool_avail_count(r.pool);

		if (avail != npool) {
			fprintf(stderr, "reasm-dpdk: %s: mbuf leak: %u of %u back in the pool\n", s->name, avail,
				npool);
			fail_status = 2;
			rc = -1;
		}
		if (o->verbose)
			fprintf(stderr, "reasm-dpdk: %s IPv%d %u B %u %s: pool %u mbufs, lost %" PRIu64
				", orphans %" PRIu64 ", pool full again\n", s->name, w->family, w->payload,
				w->in_flight, row->order, npool, r.lost, r.orphans);
		rte_mempool_free(r.pool);
	}
	return rc;
}

/* ------------------------------------------------------------- output */

static void cpu_model(char *buf, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	snprintf(buf, n, "unknown");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *c = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && c != NULL) {
			c++;
			while (*c == ' ' || *c == '\t')
				c++;
			c[strcspn(c, "\n")] = 0;
			snprintf(buf, n, "%s", c);
			break;
		}
	}
	fclose(f);
}

static void print_header(const struct opts *o, const char *cpu)
{
	printf("DPDK rte_ip_frag reassembly (%s, RTE_LIBRTE_IP_FRAG_MAX_FRAG %d), one core (lcore %u), "
	       "UDP, warm set, chain delivery; fragment payload IPv4 %d / IPv6 %d B; median of %d x %.2fs; "
	       "prefetch %u; cpu: %s\n",
	       rte_version(), RTE_LIBRTE_IP_FRAG_MAX_FRAG, o->cpu, V4_FRAG, V6_FRAG, REPS, o->seconds,
	       o->prefetch, cpu);
	printf("%3s %7s %5s %9s %-9s %-22s %12s %9s %9s  %s\n", "fam", "payload", "frags", "in_flight", "order",
	       "shape", "dgrams/s", "ns/frag", "completed", "note");
	fflush(stdout);
}

static void print_row(const struct row *r)
{
	char shape[64];

	snprintf(shape, sizeof(shape), "%s%s", r->shape,
		 strcmp(r->role, "sweep") == 0 || strcmp(r->role, "custom") == 0 ? "" :
		 strcmp(r->role, "example") == 0 ? " (ex)" : " (perf)");
	if (r->ok)
		printf("%3d %7u %5u %9u %-9s %-22s %12.0f %9.1f %9.4f  %s\n", r->family, r->payload, r->fragments,
		       r->in_flight, r->order, shape, r->dgrams_per_s, r->ns_per_frag, r->completed_share,
		       r->note);
	else
		printf("%3d %7u %5u %9u %-9s %-22s %12s %9s %9.4f  %s\n", r->family, r->payload, r->fragments,
		       r->in_flight, r->order, shape, "-", "-", r->completed_share, r->note);
	fflush(stdout);
}

static void print_json_row(const struct row *r, bool last)
{
	printf("    {\"impl\": \"dpdk\", \"shape\": \"%s\", \"shape_role\": \"%s\", \"bucket_num\": %u, "
	       "\"bucket_entries\": %u, \"max_entries\": %u, \"family\": %d, \"payload\": %u, "
	       "\"fragments\": %u, \"in_flight\": %u, \"order\": \"%s\", \"delivery\": \"chain\", "
	       "\"set\": \"warm\", \"status\": \"%s\", ",
	       r->shape, r->role, r->buckets, r->entries, r->max_entries, r->family, r->payload, r->fragments,
	       r->in_flight, r->order, r->ok ? "ok" : "incomplete");
	printf("\"dgrams_per_s\": %.1f, ", r->dgrams_per_s);
	if (isnan(r->ns_per_frag))
		printf("\"ns_per_frag\": null, ");
	else
		printf("\"ns_per_frag\": %.2f, ", r->ns_per_frag);
	printf("\"completed_share\": %.6f, \"warmup_frags_dropped\": %" PRIu64 ", \"note\": \"%s\"}%s\n",
	       r->completed_share, r->frags_dropped, r->note, last ? "" : ",");
}

/* -------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: reasm-dpdk [options] [-- extra EAL arguments]\n"
		"  DPDK rte_ip_frag on flowsteer's `bench reasm --set warm --delivery chain` workload.\n"
		"  --family 4|6            only this IP version\n"
		"  --in-flight 64|4096     only this many datagrams in flight\n"
		"  --order in-order|reversed|shuffled\n"
		"  --payload 4416|65507    only this UDP payload (65507: 64 in flight only)\n"
		"  --shape LIST            comma-separated: example, perftest, sweep, all, or bktBxE[/maxM]\n"
		"                          (default all)\n"
		"  --seconds S             timed seconds per repetition (default 1.0; 3 repetitions)\n"
		"  --cpu N                 core to run on (default 1)\n"
		"  --prefetch N            prefetch packet data N packets ahead, as examples/ip_reassembly\n"
		"                          (default %d; 0 disables)\n"
		"  --mem MB                EAL memory, no hugepages (default 2048)\n"
		"  --json                  print {\"results\": [...]}\n"
		"  --verbose               per-case pool / loss details on stderr\n"
		"  --dump-frames N         print the first N frames of the first case, in push order, and exit\n",
		PREFETCH_OFFSET);
}

static int add_shape(struct shape **v, size_t *n, const struct shape *s)
{
	struct shape *nv = realloc(*v, (*n + 1) * sizeof(**v));
	size_t i;

	if (nv == NULL)
		return -1;
	*v = nv;
	nv[*n] = *s;
	shape_name(&nv[*n]);
	for (i = 0; i < *n; i++)
		if (strcmp(nv[i].name, nv[*n].name) == 0)
			return 0; /* already listed */
	(*n)++;
	return 0;
}

static int parse_shapes(const char *arg, struct shape **v, size_t *n)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int rc = 0;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok != NULL && rc == 0; tok = strtok_r(NULL, ",", &save)) {
		bool all = strcmp(tok, "all") == 0;
		unsigned bkt, ent, max = 0;
		int used = 0;

		if (all || strcmp(tok, "example") == 0)
			rc = add_shape(v, n, &shape_example);
		if (rc == 0 && (all || strcmp(tok, "perftest") == 0))
			rc = add_shape(v, n, &shape_perftest);
		if (rc == 0 && (all || strcmp(tok, "sweep") == 0)) {
			size_t i, j;

			for (i = 0; i < RTE_DIM(sweep_buckets) && rc == 0; i++)
				for (j = 0; j < RTE_DIM(sweep_entries) && rc == 0; j++) {
					struct shape s = {"", "sweep", sweep_buckets[i], sweep_entries[j],
							  sweep_buckets[i] * sweep_entries[j], NSEC_PER_SEC};

					rc = add_shape(v, n, &s);
				}
		}
		if (all || strcmp(tok, "example") == 0 || strcmp(tok, "perftest") == 0 ||
		    strcmp(tok, "sweep") == 0)
			continue;
		if ((sscanf(tok, "bkt%ux%u/max%u%n", &bkt, &ent, &max, &used) == 3 && tok[used] == 0) ||
		    (sscanf(tok, "bkt%ux%u%n", &bkt, &ent, &used) == 2 && tok[used] == 0)) {
			struct shape s = {"", "custom", bkt, ent, max ? max : bkt * ent, NSEC_PER_SEC};

			if (bkt == 0 || ent == 0 || !rte_is_power_of_2(ent) || bkt > (1u << 24) ||
			    s.max_entries == 0 || s.max_entries > shape_capacity(&s)) {
				fprintf(stderr, "reasm-dpdk: --shape %s: entries must be a power of two and "
					"max <= 2 * pow2(buckets) * entries\n", tok);
				rc = -1;
			} else {
				rc = add_shape(v, n, &s);
			}
		} else {
			fprintf(stderr, "reasm-dpdk: --shape %s: expected example, perftest, sweep, all or "
				"bktBxE[/maxM]\n", tok);
			rc = -1;
		}
	}
	free(copy);
	return rc;
}

static int parse_u32(const char *name, const char *arg, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno != 0 || end == arg || *end != 0 || v > UINT32_MAX) {
		fprintf(stderr, "reasm-dpdk: --%s %s: expected a number\n", name, arg);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

struct case_key {
	int family;
	uint32_t payload, in_flight;
	enum order order;
};

/*
 * The cases in the order flowsteer's warm run builds them (family, then
 * in flight, then order), the 65,507-byte ones after them; rng_skip is the
 * number of generator draws that run makes before the case (only shuffled
 * cases draw: in_flight * (fragments - 1) per block), so the shuffled
 * permutations are flowsteer's. flowsteer measures 65,507-byte payloads
 * only in its cold set: their permutations just continue the generator.
 */
static size_t all_cases(struct case_key *keys, uint64_t *skips)
{
	static const uint32_t in_flights[] = {64, 4096};
	uint64_t draws = 0;
	size_t n = 0;
	int fam, pass;
	uint32_t i;
	int o;

	for (pass = 0; pass < 2; pass++) {
		for (fam = 4; fam <= 6; fam += 2) {
			uint32_t payload = pass == 0 ? SMALL : LARGE;
			uint32_t fs = fam == 4 ? V4_FRAG : V6_FRAG;
			uint32_t frags = (UDP_HDR + payload + fs - 1) / fs;

			for (i = 0; i < (pass == 0 ? 2u : 1u); i++) {
				for (o = 0; o < ORDER_COUNT; o++) {
					keys[n] = (struct case_key){fam, payload, in_flights[i], (enum order)o};
					skips[n] = draws;
					if (o == ORDER_SHUFFLED)
						draws += (uint64_t)WARM_BLOCKS * in_flights[i] * (frags - 1);
					n++;
				}
			}
		}
	}
	return n;
}

static void dump_frames(const struct workload *w, int n)
{
	uint8_t frame[FRAME_MAX];
	uint32_t s, len, k;

	for (s = 0; s < w->pushes && (int)s < n; s++) {
		len = build_fragment(w, w->slot_dgram[s], w->slot_frag[s], frame);
		printf("%u %u %u ", w->slot_dgram[s], w->slot_frag[s], len);
		for (k = 0; k < len; k++)
			printf("%02x", frame[k]);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"family", required_argument, NULL, 'f'},   {"in-flight", required_argument, NULL, 'i'},
		{"order", required_argument, NULL, 'o'},    {"payload", required_argument, NULL, 'p'},
		{"shape", required_argument, NULL, 's'},    {"seconds", required_argument, NULL, 'S'},
		{"cpu", required_argument, NULL, 'c'},      {"prefetch", required_argument, NULL, 'P'},
		{"mem", required_argument, NULL, 'm'},      {"json", no_argument, NULL, 'j'},
		{"verbose", no_argument, NULL, 'v'},        {"dump-frames", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	struct opts o = {.seconds = 1.0, .cpu = 1, .prefetch = PREFETCH_OFFSET, .mem_mb = 2048, .order = -1};
	struct shape *shapes = NULL;
	size_t nshapes = 0, ncases, c, i, nrows = 0;
	struct case_key keys[32];
	uint64_t skips[32];
	struct row *rows = NULL;
	char cpu[128], lcore[16], mem[16];
	char *eal_argv[64];
	int eal_argc = 0, opt, ret;
	uint32_t u;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f':
			if (parse_u32("family", optarg, &u) != 0 || (u != 4 && u != 6)) {
				fprintf(stderr, "reasm-dpdk: --family: expected 4 or 6\n");
				return 1;
			}
			o.family = (int)u;
			break;
		case 'i':
			if (parse_u32("in-flight", optarg, &o.in_flight) != 0 ||
			    (o.in_flight != 64 && o.in_flight != 4096)) {
				fprintf(stderr, "reasm-dpdk: --in-flight: expected 64 or 4096\n");
				return 1;
			}
			break;
		case 'o':
			for (o.order = 0; o.order < ORDER_COUNT; o.order++)
				if (strcmp(optarg, order_names[o.order]) == 0)
					break;
			if (o.order == ORDER_COUNT) {
				fprintf(stderr, "reasm-dpdk: --order %s: expected in-order, reversed or shuffled\n",
					optarg);
				return 1;
			}
			break;
		case 'p':
			if (parse_u32("payload", optarg, &o.payload) != 0 ||
			    (o.payload != SMALL && o.payload != LARGE)) {
				fprintf(stderr, "reasm-dpdk: --payload: expected %d or %d\n", SMALL, LARGE);
				return 1;
			}
			break;
		case 's':
			if (parse_shapes(optarg, &shapes, &nshapes) != 0)
				return 1;
			break;
		case 'S': {
			char *end;

			o.seconds = strtod(optarg, &end);
			if (end == optarg || *end != 0 || !(o.seconds > 0) || !isfinite(o.seconds)) {
				fprintf(stderr, "reasm-dpdk: --seconds must be positive\n");
				return 1;
			}
			break;
		}
		case 'c':
			if (parse_u32("cpu", optarg, &u) != 0)
				return 1;
			o.cpu = u;
			break;
		case 'P':
			if (parse_u32("prefetch", optarg, &o.prefetch) != 0 || o.prefetch > BURST) {
				fprintf(stderr, "reasm-dpdk: --prefetch: expected 0..%d\n", BURST);
				return 1;
			}
			break;
		case 'm':
			if (parse_u32("mem", optarg, &u) != 0 || u < 64) {
				fprintf(stderr, "reasm-dpdk: --mem: expected megabytes, at least 64\n");
				return 1;
			}
			o.mem_mb = u;
			break;
		case 'j':
			o.json = true;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'd':
			if (parse_u32("dump-frames", optarg, &u) != 0 || u == 0 || u > 1000000)
				return 1;
			o.dump_frames = (int)u;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (nshapes == 0 && parse_shapes("all", &shapes, &nshapes) != 0)
		return 1;

	ncases = all_cases(keys, skips);
	rows = calloc(ncases * nshapes, sizeof(*rows));
	if (rows == NULL) {
		fprintf(stderr, "reasm-dpdk: out of memory\n");
		return 1;
	}
	/* Which cases the filters leave. */
	for (c = 0, i = 0; c < ncases; c++) {
		const struct case_key *k = &keys[c];

		if ((o.family && k->family != o.family) || (o.in_flight && k->in_flight != o.in_flight) ||
		    (o.order >= 0 && (int)k->order != o.order) || (o.payload && k->payload != o.payload))
			continue;
		keys[i] = *k;
		skips[i] = skips[c];
		i++;
	}
	ncases = i;
	if (ncases == 0) {
		fprintf(stderr, "reasm-dpdk: no case matches the filters (65507-byte payloads: 64 in flight only)\n");
		return 1;
	}
	if (o.dump_frames > 0) {
		struct workload w;

		if (workload_init(&w, keys[0].family, keys[0].payload, keys[0].in_flight, keys[0].order,
				  skips[0]) != 0)
			return 1;
		dump_frames(&w, o.dump_frames);
		workload_free(&w);
		return 0;
	}

	/*
	 * EAL without hugepages (memory from an ordinary mmap of --mem MB),
	 * PCI or telemetry; --no-huge needs legacy memory, which --in-memory
	 * refuses, so --no-shconf keeps it from sharing its config instead.
	 * -l pins the main thread to --cpu.
	 */
	snprintf(lcore, sizeof(lcore), "%u", o.cpu);
	snprintf(mem, sizeof(mem), "%u", o.mem_mb);
	eal_argv[eal_argc++] = argv[0];
	eal_argv[eal_argc++] = "-l";
	eal_argv[eal_argc++] = lcore;
	eal_argv[eal_argc++] = "--no-huge";
	eal_argv[eal_argc++] = "-m";
	eal_argv[eal_argc++] = mem;
	eal_argv[eal_argc++] = "--no-pci";
	eal_argv[eal_argc++] = "--no-shconf";
	eal_argv[eal_argc++] = "--no-telemetry";
	eal_argv[eal_argc++] = o.verbose ? "--log-level=notice" : "--log-level=error";
	for (; optind < argc && eal_argc < (int)RTE_DIM(eal_argv) - 1; optind++)
		eal_argv[eal_argc++] = argv[optind];
	if (optind < argc) {
		fprintf(stderr, "reasm-dpdk: too many EAL arguments\n");
		return 1;
	}
	eal_argv[eal_argc] = NULL;
	ret = rte_eal_init(eal_argc, eal_argv);
	if (ret < 0) {
		fprintf(stderr, "reasm-dpdk: rte_eal_init failed: %s (is --cpu %u online?)\n",
			rte_strerror(rte_errno), o.cpu);
		return 1;
	}

	cpu_model(cpu, sizeof(cpu));
	if (!o.json)
		print_header(&o, cpu);
	for (c = 0; c < ncases; c++) {
		struct workload w;
		size_t sh;

		if (workload_init(&w, keys[c].family, keys[c].payload, keys[c].in_flight, keys[c].order,
				  skips[c]) != 0) {
			fail_status = 1;
			break;
		}
		for (sh = 0; sh < nshapes; sh++) {
			struct row *row = &rows[nrows];

			if (run_case(&w, &shapes[sh], &o, row) != 0) {
				if (fail_status == 0)
					fail_status = 2;
				continue;
			}
			nrows++;
			if (!o.json)
				print_row(row);
		}
		/* Best shape of the case. */
		if (!o.json && nshapes > 1) {
			const struct row *best = NULL;

			for (i = nrows; i-- > 0 && rows[i].family == w.family && rows[i].payload == w.payload &&
					rows[i].in_flight == w.in_flight &&
					strcmp(rows[i].order, order_names[w.order]) == 0;)
				if (rows[i].ok && (best == NULL || rows[i].dgrams_per_s > best->dgrams_per_s))
					best = &rows[i];
			if (best != NULL)
				printf("    best: %s %.0f dgrams/s\n", best->shape, best->dgrams_per_s);
			else
				printf("    best: none (DPDK cannot do this case)\n");
			fflush(stdout);
		}
		workload_free(&w);
	}
	if (o.json) {
		printf("{\n  \"schema\": \"flowsteer.bench.reasm.dpdk.v1\",\n  \"dpdk\": \"%s\",\n"
		       "  \"max_frag\": %d,\n  \"cpu\": \"%s\",\n  \"lcore\": %u,\n  \"seconds\": %.3f,\n"
		       "  \"prefetch\": %u,\n  \"results\": [\n",
		       rte_version(), RTE_LIBRTE_IP_FRAG_MAX_FRAG, cpu, o.cpu, o.seconds, o.prefetch);
		for (i = 0; i < nrows; i++)
			print_json_row(&rows[i], i + 1 == nrows);
		printf("  ]\n}\n");
	}
	free(rows);
	free(shapes);
	rte_eal_cleanup();
	return fail_status;
}
