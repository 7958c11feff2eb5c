/*
 * flowtable-dpdk: DPDK's cuckoo hash (rte_hash) as a flow table, on a key
 * stream written by flowsteer (crates/bench/harness/src/flow/dpdk.rs,
 * write_keys), so the flow table benchmark has a DPDK anchor fed the very
 * same keys in the very same order.
 *
 * Key file (all little-endian):
 *   8 bytes  magic "FSKEY001"
 *   u32      key_len (flowsteer writes 48)
 *   u32      burst (1..64, RTE_HASH_LOOKUP_BULK_MAX)
 *   u64      entries (the size of the table to create)
 *   u64      n_distinct (distinct keys in the stream)
 *   u64      n_stream (keys in the stream)
 *   n_stream keys of key_len bytes each
 *
 * Work per burst of `burst` keys, the stream consumed in order:
 *   rte_hash_lookup_bulk_data(h, ptrs, n, &hit_mask, data);
 *   every hit:  (*(uint64_t *)data[i])++   (the flow's counter)
 *   every miss: the next slot of a uint64_t counters[] array is the flow's
 *               counter, set to 1, and rte_hash_add_key_data(h, key, &slot)
 *               adds it; -ENOSPC (table full) is counted as refused.
 * A key that occurs twice within one burst misses twice in the bulk
 * lookup; its second occurrence is matched against the burst's earlier
 * inserts (a 64-bit fold of the key, then memcmp) and counted as a hit on
 * that fresh entry, so the counts are those of a one-key-at-a-time
 * lookup-or-insert: inserts == n_distinct (nothing refused), and per pass
 * hits == n_stream - n_distinct from empty, n_stream afterwards.
 *
 * Variants, each a fresh table (created, run, freed):
 *   crc      entries = the file's entries, hash_func rte_hash_crc, no flags
 *   crc_ext  entries = n_distinct rounded up to a power of two (at least 8),
 *            RTE_HASH_EXTRA_FLAGS_EXT_TABLE (chained overflow buckets: never
 *            refuses below `entries`)
 * Pass 1 starts from the empty table (phase "fill"); passes 2..N run on the
 * filled table (phase "steady": the median ns/key of those passes). Each
 * pass is timed with CLOCK_MONOTONIC around the whole stream.
 *
 * Not timed: mapping the key file (MAP_POPULATE), creating and freeing the
 * table, and first-touching memory: EAL's --no-huge memory is an anonymous
 * mapping whose pages fault in on first use, so before the first table the
 * part of the heap the tables will use is written once and freed again, and
 * the counters array is zeroed before each variant (flowsteer's flow
 * benchmark likewise keeps first-touch page faults out of its timing).
 *
 * mib: the EAL heap bytes rte_hash_create allocated (rte_malloc socket
 * stats before and after: buckets, key store, free-slot rings), not the
 * counters array. If the stats cannot be read, an estimate from the
 * library's sizing rules, flagged "mib_estimated": true.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_version.h>

#define MAGIC "FSKEY001"
#define HEADER_LEN 40
#define KEY_LEN_MAX 1024
#define DEFAULT_PASSES 3
#define DEFAULT_CPU 1
#define DEFAULT_MEM_MB 2048
#define MAX_PASSES 1000
/* rte_hash_create refuses fewer entries than one bucket holds. */
#define MIN_ENTRIES 8

/* Exit statuses. */
#define EXIT_EAL 1
#define EXIT_USAGE 2

struct keyfile {
	const char *path;
	const uint8_t *map; /* the whole file */
	size_t map_len;
	const uint8_t *keys;
	uint32_t key_len, burst;
	uint64_t entries, n_distinct, n_stream;
};

struct opts {
	const char *keys;
	unsigned passes, cpu, mem_mb;
	bool json;
};

struct counts {
	uint64_t hits, inserts, refused;
};

/* One variant's result: the fill pass and the steady passes. */
struct result {
	const char *variant;
	uint64_t entries;
	double fill_ns_per_key, steady_ns_per_key;
	double *steady_samples; /* ns/key of each steady pass */
	unsigned steady_passes;
	struct counts fill, steady;
	double mib;
	bool mib_estimated;
};

/* ------------------------------------------------------------ helpers */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static uint64_t pow2_at_least(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median (the mean of the two middle values for an even count). */
static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

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

/* s as a JSON string body: quotes, backslashes and control bytes escaped. */
static void json_str(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
}

/* "22.11.11" from rte_version()'s "DPDK 22.11.11". */
static const char *dpdk_version(void)
{
	const char *v = rte_version();

	return strncmp(v, "DPDK ", 5) == 0 ? v + 5 : v;
}

/* ------------------------------------------------------------ key file */

/* Maps and checks the key file; on failure prints why and returns -1. */
static int keyfile_open(struct keyfile *kf, const char *path)
{
	struct stat st;
	const uint8_t *h;
	uint64_t body;
	int fd;

	memset(kf, 0, sizeof(*kf));
	kf->path = path;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < HEADER_LEN) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: not a key file (%s)\n", path,
			S_ISREG(st.st_mode) ? "shorter than the 40-byte header" : "not a regular file");
		close(fd);
		return -1;
	}
	kf->map_len = (size_t)st.st_size;
	kf->map = mmap(NULL, kf->map_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (kf->map == MAP_FAILED) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: mmap: %s\n", path, strerror(errno));
		kf->map = NULL;
		return -1;
	}
	h = kf->map;
	if (memcmp(h, MAGIC, 8) != 0) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: bad magic (expected \"%s\")\n", path, MAGIC);
		return -1;
	}
	kf->key_len = le32(h + 8);
	kf->burst = le32(h + 12);
	kf->entries = le64(h + 16);
	kf->n_distinct = le64(h + 24);
	kf->n_stream = le64(h + 32);
	kf->keys = h + HEADER_LEN;
	if (kf->key_len == 0 || kf->key_len > KEY_LEN_MAX) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: key_len %" PRIu32 " (expected 1..%d)\n", path,
			kf->key_len, KEY_LEN_MAX);
		return -1;
	}
	if (kf->burst == 0 || kf->burst > RTE_HASH_LOOKUP_BULK_MAX) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: burst %" PRIu32 " (expected 1..%d)\n", path,
			kf->burst, RTE_HASH_LOOKUP_BULK_MAX);
		return -1;
	}
	if (kf->entries < MIN_ENTRIES || kf->entries > RTE_HASH_ENTRIES_MAX) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: entries %" PRIu64 " (rte_hash takes %d..%d)\n", path,
			kf->entries, MIN_ENTRIES, RTE_HASH_ENTRIES_MAX);
		return -1;
	}
	if (kf->n_stream == 0 || kf->n_distinct == 0 || kf->n_distinct > kf->n_stream ||
	    kf->n_distinct > RTE_HASH_ENTRIES_MAX) {
		fprintf(stderr,
			"flowtable-dpdk: --keys %s: n_distinct %" PRIu64 ", n_stream %" PRIu64
			" (expected 1 <= n_distinct <= n_stream, n_distinct <= %d)\n",
			path, kf->n_distinct, kf->n_stream, RTE_HASH_ENTRIES_MAX);
		return -1;
	}
	body = kf->map_len - HEADER_LEN;
	if (kf->n_stream > body / kf->key_len || body != kf->n_stream * kf->key_len) {
		fprintf(stderr,
			"flowtable-dpdk: --keys %s: %" PRIu64 " bytes of keys, the header says %" PRIu64
			" keys of %" PRIu32 " bytes\n",
			path, body, kf->n_stream, kf->key_len);
		return -1;
	}
	return 0;
}

static void keyfile_close(struct keyfile *kf)
{
	if (kf->map != NULL)
		munmap((void *)(uintptr_t)kf->map, kf->map_len);
	kf->map = NULL;
}

/* ------------------------------------------------------------ memory */

/* EAL heap bytes in use, over all sockets; -1 if unreadable. */
static int64_t heap_allocated(void)
{
	unsigned i, n = rte_socket_count();
	int64_t total = 0;

	for (i = 0; i < n; i++) {
		struct rte_malloc_socket_stats s;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &s) != 0)
			return -1;
		total += (int64_t)s.heap_allocsz_bytes;
	}
	return total;
}

/*
 * What rte_hash_create allocates (lib/hash/rte_cuckoo_hash.c, 22.11,
 * single writer): key store of (entries + 1) slots of
 * align16(8 + key_len) bytes, pow2(entries) / 8 buckets of 64 bytes (twice
 * with the extendable table), a free-slot ring of pow2(entries + 1)
 * 4-byte elements (and one of pow2(buckets + 1) for the extendable
 * buckets), plus small fixed parts.
 */
static uint64_t estimate_bytes(uint64_t entries, uint32_t key_len, bool ext)
{
	uint64_t slots = entries + 1, buckets = pow2_at_least(entries) / 8;
	uint64_t b = slots * ((8 + key_len + 15) / 16 * 16) + buckets * 64 + pow2_at_least(slots) * 4;

	if (ext)
		b += buckets * 64 + pow2_at_least(buckets + 1) * 4;
	return b + 16384;
}

/*
 * Writes `bytes` of the heap once and frees them, so that the tables
 * created afterwards (carved from the same end of the free block) do not
 * take first-touch page faults in their timed fill. Best effort.
 */
static void prefault_heap(uint64_t bytes)
{
	struct rte_malloc_socket_stats s;
	void *p;

	/* Leave 1 MiB of the largest free block for the heap's headers. */
	if (rte_malloc_get_socket_stats((int)rte_socket_id(), &s) == 0 && bytes + (1u << 20) > s.greatest_free_size)
		bytes = s.greatest_free_size > (1u << 20) ? s.greatest_free_size - (1u << 20) : 0;
	if (bytes == 0)
		return;
	p = rte_malloc_socket("flowtable_prefault", bytes, RTE_CACHE_LINE_SIZE, (int)rte_socket_id());
	if (p == NULL)
		return;
	memset(p, 0xa5, bytes);
	rte_free(p);
}

/* ------------------------------------------------------------ the run */

/* A 64-bit fold of a key, to tell keys of one burst apart cheaply. */
static inline uint64_t key_fold(const uint8_t *k, uint32_t len)
{
	uint64_t f = 0, w;
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, k + i, 8);
		f = (f ^ w) * 0x9e3779b97f4a7c15ULL;
	}
	for (; i < len; i++)
		f = (f ^ k[i]) * 0x9e3779b97f4a7c15ULL;
	return f;
}

struct table {
	struct rte_hash *h;
	uint64_t *counters; /* one per possible insert, and a spare */
	uint64_t nslots, next;
};

/*
 * One pass over the stream; adds to *c. Returns the elapsed ns, or 0 on
 * an unexpected rte_hash error (printed).
 */
static uint64_t run_pass(struct table *t, const struct keyfile *kf, struct counts *c)
{
	const uint32_t len = kf->key_len, burst = kf->burst;
	const void *ptrs[RTE_HASH_LOOKUP_BULK_MAX];
	void *data[RTE_HASH_LOOKUP_BULK_MAX];
	/* This burst's successful inserts: key index, fold, counter. */
	uint32_t ins_key[RTE_HASH_LOOKUP_BULK_MAX];
	uint64_t ins_fold[RTE_HASH_LOOKUP_BULK_MAX];
	uint64_t *ins_ctr[RTE_HASH_LOOKUP_BULK_MAX];
	uint64_t hits = 0, inserts = 0, refused = 0, off, t0, t1;
	int bad = 0;

	t0 = now_ns();
	for (off = 0; off < kf->n_stream; off += burst) {
		const uint8_t *base = kf->keys + off * len;
		uint32_t n = kf->n_stream - off < burst ? (uint32_t)(kf->n_stream - off) : burst;
		uint64_t mask = 0, miss, m;
		uint32_t i, j, nins = 0;

		for (i = 0; i < n; i++)
			ptrs[i] = base + (size_t)i * len;
		rte_hash_lookup_bulk_data(t->h, ptrs, n, &mask, data);
		for (m = mask; m != 0; m &= m - 1)
			(*(uint64_t *)data[__builtin_ctzll(m)])++;
		hits += (uint64_t)__builtin_popcountll(mask);
		miss = ~mask & (n == 64 ? ~0ULL : (1ULL << n) - 1);
		for (; miss != 0; miss &= miss - 1) {
			const uint8_t *k;
			uint64_t f, *ctr;
			int ret;

			i = (uint32_t)__builtin_ctzll(miss);
			k = ptrs[i];
			f = key_fold(k, len);
			for (j = 0; j < nins; j++)
				if (ins_fold[j] == f && memcmp(ptrs[ins_key[j]], k, len) == 0)
					break;
			if (j < nins) { /* inserted earlier in this burst */
				(*ins_ctr[j])++;
				hits++;
				continue;
			}
			/* counters[nslots] is the spare a full table's refused add points at. */
			ctr = &t->counters[t->next];
			ret = rte_hash_add_key_data(t->h, k, ctr);
			if (ret == 0) {
				if (t->next == t->nslots) { /* cannot happen: rte_hash holds at most `entries` */
					bad = -ENOBUFS;
					break;
				}
				*ctr = 1;
				t->next++;
				inserts++;
				ins_key[nins] = i;
				ins_fold[nins] = f;
				ins_ctr[nins] = ctr;
				nins++;
			} else if (ret == -ENOSPC) {
				refused++;
			} else {
				bad = ret;
				break;
			}
		}
		if (bad != 0)
			break;
	}
	t1 = now_ns();
	if (bad != 0) {
		fprintf(stderr, "flowtable-dpdk: rte_hash_add_key_data: %s\n",
			bad == -ENOBUFS ? "more inserts than table entries" : strerror(-bad));
		return 0;
	}
	c->hits += hits;
	c->inserts += inserts;
	c->refused += refused;
	return t1 > t0 ? t1 - t0 : 1;
}

/* Creates, runs and frees one variant's table; 0, or -1 (printed). */
static int run_variant(const struct keyfile *kf, const struct opts *o, const char *variant, uint64_t entries,
		       uint8_t flags, struct result *r)
{
	struct rte_hash_parameters p = {
		.name = variant,
		.entries = (uint32_t)entries,
		.key_len = kf->key_len,
		.hash_func = rte_hash_crc,
		.hash_func_init_val = 0,
		.socket_id = (int)rte_socket_id(),
		.extra_flag = flags,
	};
	struct table t = {.nslots = entries, .next = 0};
	int64_t before, after;
	uint64_t sum = 0, i;
	unsigned pass;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	r->variant = variant;
	r->entries = entries;
	r->steady_passes = o->passes - 1;
	r->steady_samples = calloc(o->passes, sizeof(double));
	t.counters = malloc((entries + 1) * sizeof(uint64_t));
	if (r->steady_samples == NULL || t.counters == NULL) {
		fprintf(stderr, "flowtable-dpdk: %s: out of memory for %" PRIu64 " counters\n", variant, entries);
		free(t.counters);
		free(r->steady_samples);
		r->steady_samples = NULL;
		return -1;
	}
	memset(t.counters, 0, (entries + 1) * sizeof(uint64_t)); /* first touch, untimed */

	before = heap_allocated();
	t.h = rte_hash_create(&p);
	if (t.h == NULL) {
		fprintf(stderr, "flowtable-dpdk: %s: rte_hash_create(entries %" PRIu64 "): %s (raise --mem?)\n",
			variant, entries, rte_strerror(rte_errno));
		free(t.counters);
		free(r->steady_samples);
		r->steady_samples = NULL;
		return -1;
	}
	after = heap_allocated();
	if (before >= 0 && after >= before) {
		r->mib = (double)(after - before) / (1024.0 * 1024.0);
	} else {
		r->mib = (double)estimate_bytes(entries, kf->key_len, flags & RTE_HASH_EXTRA_FLAGS_EXT_TABLE) /
			 (1024.0 * 1024.0);
		r->mib_estimated = true;
	}

	for (pass = 0; pass < o->passes; pass++) {
		struct counts *c = pass == 0 ? &r->fill : &r->steady;
		uint64_t ns = run_pass(&t, kf, c);

		if (ns == 0)
			goto out;
		if (pass == 0)
			r->fill_ns_per_key = (double)ns / (double)kf->n_stream;
		else
			r->steady_samples[pass - 1] = (double)ns / (double)kf->n_stream;
	}
	if (r->steady_passes > 0) {
		double *sorted = malloc(r->steady_passes * sizeof(double));

		if (sorted == NULL)
			goto out;
		memcpy(sorted, r->steady_samples, r->steady_passes * sizeof(double));
		r->steady_ns_per_key = median(sorted, r->steady_passes);
		free(sorted);
	}

	/* Every key seen was counted once: on its insert or on a hit. */
	for (i = 0; i < t.next; i++)
		sum += t.counters[i];
	if (sum != r->fill.hits + r->fill.inserts + r->steady.hits + r->steady.inserts ||
	    (uint64_t)rte_hash_count(t.h) != r->fill.inserts + r->steady.inserts) {
		fprintf(stderr,
			"flowtable-dpdk: %s: counts do not add up (counters %" PRIu64 ", hits + inserts %" PRIu64
			", table count %d, inserts %" PRIu64 ")\n",
			variant, sum, r->fill.hits + r->fill.inserts + r->steady.hits + r->steady.inserts,
			rte_hash_count(t.h), r->fill.inserts + r->steady.inserts);
		goto out;
	}
	rc = 0;
out:
	rte_hash_free(t.h);
	free(t.counters);
	if (rc != 0) {
		free(r->steady_samples);
		r->steady_samples = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------ output */

static void print_json(const struct keyfile *kf, const struct opts *o, const char *cpu, const struct result *r,
		       size_t nr)
{
	size_t i;
	unsigned k;

	printf("{\"schema\":\"flowsteer.bench.flow.dpdk.v1\",\"dpdk\":\"");
	json_str(dpdk_version());
	printf("\",\"cpu\":\"");
	json_str(cpu);
	printf("\",\"lcore\":%u,\"key_len\":%" PRIu32 ",\"burst\":%" PRIu32 ",\"entries\":%" PRIu64
	       ",\"n_distinct\":%" PRIu64 ",\"n_stream\":%" PRIu64 ",\"passes\":%u,\"results\":[",
	       o->cpu, kf->key_len, kf->burst, kf->entries, kf->n_distinct, kf->n_stream, o->passes);
	for (i = 0; i < nr; i++) {
		const struct result *x = &r[i];

		printf("%s{\"variant\":\"%s\",\"phase\":\"fill\",\"entries\":%" PRIu64
		       ",\"passes\":1,\"ns_per_key\":%.3f,\"samples\":[%.3f],\"hits\":%" PRIu64
		       ",\"inserts\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"mib\":%.3f,\"mib_estimated\":%s}",
		       i ? "," : "", x->variant, x->entries, x->fill_ns_per_key, x->fill_ns_per_key, x->fill.hits,
		       x->fill.inserts, x->fill.refused, x->mib, x->mib_estimated ? "true" : "false");
		if (x->steady_passes == 0)
			continue;
		printf(",{\"variant\":\"%s\",\"phase\":\"steady\",\"entries\":%" PRIu64
		       ",\"passes\":%u,\"ns_per_key\":%.3f,\"samples\":[",
		       x->variant, x->entries, x->steady_passes, x->steady_ns_per_key);
		for (k = 0; k < x->steady_passes; k++)
			printf("%s%.3f", k ? "," : "", x->steady_samples[k]);
		printf("],\"hits\":%" PRIu64 ",\"inserts\":%" PRIu64 ",\"refused\":%" PRIu64
		       ",\"mib\":%.3f,\"mib_estimated\":%s}",
		       x->steady.hits, x->steady.inserts, x->steady.refused, x->mib,
		       x->mib_estimated ? "true" : "false");
	}
	printf("]}\n");
}

static void print_row(const struct result *x, const char *phase, unsigned passes, double ns, const struct counts *c)
{
	printf("%-8s %-7s %10" PRIu64 " %6u %9.2f %12" PRIu64 " %10" PRIu64 " %9" PRIu64 " %9.1f%s\n", x->variant,
	       phase, x->entries, passes, ns, c->hits, c->inserts, c->refused, x->mib,
	       x->mib_estimated ? " (estimated)" : "");
}

static void print_text(const struct keyfile *kf, const struct opts *o, const char *cpu, const struct result *r,
		       size_t nr)
{
	size_t i;

	printf("DPDK %s rte_hash (hash_func rte_hash_crc), %s, lcore %u\n", dpdk_version(), cpu, o->cpu);
	printf("keys %s: key_len %" PRIu32 ", burst %" PRIu32 ", entries %" PRIu64 ", n_distinct %" PRIu64
	       ", n_stream %" PRIu64 ", passes %u\n",
	       kf->path, kf->key_len, kf->burst, kf->entries, kf->n_distinct, kf->n_stream, o->passes);
	printf("%-8s %-7s %10s %6s %9s %12s %10s %9s %9s\n", "variant", "phase", "entries", "passes", "ns/key", "hits",
	       "inserts", "refused", "MiB");
	for (i = 0; i < nr; i++) {
		print_row(&r[i], "fill", 1, r[i].fill_ns_per_key, &r[i].fill);
		if (r[i].steady_passes > 0)
			print_row(&r[i], "steady", r[i].steady_passes, r[i].steady_ns_per_key, &r[i].steady);
	}
	if (o->passes > 1)
		printf("ns/key: fill = pass 1 from an empty table; steady = median of passes 2..%u. ", o->passes);
	else
		printf("ns/key: fill = pass 1 from an empty table. ");
	printf("hits, inserts, refused: totals over the phase's passes. MiB: rte_hash's own memory.\n");
}

/* -------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: flowtable-dpdk --keys FILE [--passes N] [--cpu N] [--mem MB] [--json] [-- extra EAL arguments]\n"
		"  DPDK rte_hash as a flow table (bulk lookup, add on miss, per-flow counter) on a key stream\n"
		"  written by flowsteer (magic FSKEY001; see bench/dpdk/README.md).\n"
		"  --keys FILE   the key file\n"
		"  --passes N    passes over the stream, the first from an empty table (default %d)\n"
		"  --cpu N       core to run on: EAL -l N (default %d; an -l, -c or --lcores after -- replaces it)\n"
		"  --mem MB      EAL memory, no hugepages: -m MB (default %d)\n"
		"  --json        one line: {\"dpdk\": ..., \"results\": [...]}\n"
		"  exit status: 0 ok, 1 EAL or table failure, 2 bad arguments or key file\n",
		DEFAULT_PASSES, DEFAULT_CPU, DEFAULT_MEM_MB);
}

static int parse_uint(const char *name, const char *arg, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno != 0 || end == arg || *end != 0 || arg[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "flowtable-dpdk: --%s %s: expected a number in %u..%u\n", name, arg, lo, hi);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* Whether an EAL argument picks the cores itself. */
static bool sets_cores(const char *a)
{
	return strncmp(a, "-l", 2) == 0 || strncmp(a, "-c", 2) == 0 || strncmp(a, "--lcores", 8) == 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"keys", required_argument, NULL, 'k'}, {"passes", required_argument, NULL, 'p'},
		{"cpu", required_argument, NULL, 'c'},  {"mem", required_argument, NULL, 'm'},
		{"json", no_argument, NULL, 'j'},       {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct opts o = {.passes = DEFAULT_PASSES, .cpu = DEFAULT_CPU, .mem_mb = DEFAULT_MEM_MB};
	struct keyfile kf;
	struct result res[2];
	size_t nres = 0, i;
	char cpu[128], lcore[16], mem[16];
	char *eal_argv[64];
	int eal_argc = 0, opt, a, status = 0;
	bool own_cores = true;
	uint64_t ext_entries, need;

	/* "+": stop at the first non-option (and at "--"), no reordering. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (opt) {
		case 'k':
			o.keys = optarg;
			break;
		case 'p':
			if (parse_uint("passes", optarg, 1, MAX_PASSES, &o.passes) != 0)
				return EXIT_USAGE;
			break;
		case 'c':
			if (parse_uint("cpu", optarg, 0, RTE_MAX_LCORE - 1, &o.cpu) != 0)
				return EXIT_USAGE;
			break;
		case 'm':
			if (parse_uint("mem", optarg, 64, 1u << 20, &o.mem_mb) != 0)
				return EXIT_USAGE;
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "flowtable-dpdk: %s: unknown option, or its value is missing\n",
				argv[optind - 1]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	/* Options end at "--"; a non-option argument before it is an error. */
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		fprintf(stderr, "flowtable-dpdk: unexpected argument %s (EAL arguments go after --)\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (o.keys == NULL) {
		fprintf(stderr, "flowtable-dpdk: --keys FILE is required\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (keyfile_open(&kf, o.keys) != 0) {
		keyfile_close(&kf);
		return EXIT_USAGE;
	}
	ext_entries = pow2_at_least(kf.n_distinct);
	if (ext_entries < MIN_ENTRIES)
		ext_entries = MIN_ENTRIES;
	if (ext_entries > RTE_HASH_ENTRIES_MAX) {
		fprintf(stderr, "flowtable-dpdk: --keys %s: n_distinct %" PRIu64 " rounds up past %d entries\n",
			o.keys, kf.n_distinct, RTE_HASH_ENTRIES_MAX);
		keyfile_close(&kf);
		return EXIT_USAGE;
	}

	/*
	 * EAL as reasm-dpdk starts it: no hugepages (memory from an ordinary
	 * mmap of --mem MB), no PCI, no shared config, no telemetry; -l pins
	 * the main thread to --cpu unless the extra arguments choose cores.
	 */
	for (a = optind; a < argc; a++)
		if (sets_cores(argv[a]))
			own_cores = false;
	snprintf(lcore, sizeof(lcore), "%u", o.cpu);
	snprintf(mem, sizeof(mem), "%u", o.mem_mb);
	eal_argv[eal_argc++] = argv[0];
	if (own_cores) {
		eal_argv[eal_argc++] = "-l";
		eal_argv[eal_argc++] = lcore;
	}
	eal_argv[eal_argc++] = "--no-huge";
	eal_argv[eal_argc++] = "-m";
	eal_argv[eal_argc++] = mem;
	eal_argv[eal_argc++] = "--no-pci";
	eal_argv[eal_argc++] = "--no-shconf";
	eal_argv[eal_argc++] = "--no-telemetry";
	eal_argv[eal_argc++] = "--log-level=error";
	for (; optind < argc && eal_argc < (int)RTE_DIM(eal_argv) - 1; optind++)
		eal_argv[eal_argc++] = argv[optind];
	if (optind < argc) {
		fprintf(stderr, "flowtable-dpdk: too many EAL arguments\n");
		keyfile_close(&kf);
		return EXIT_USAGE;
	}
	eal_argv[eal_argc] = NULL;
	if (rte_eal_init(eal_argc, eal_argv) < 0) {
		fprintf(stderr, "flowtable-dpdk: rte_eal_init failed: %s (is cpu %u online? are the EAL arguments "
			"right?)\n", rte_strerror(rte_errno), o.cpu);
		keyfile_close(&kf);
		return EXIT_EAL;
	}
	if (!own_cores)
		o.cpu = rte_lcore_id();

	/* The larger table, with room for the heap's own headers. */
	need = estimate_bytes(kf.entries, kf.key_len, false);
	if (estimate_bytes(ext_entries, kf.key_len, true) > need)
		need = estimate_bytes(ext_entries, kf.key_len, true);
	prefault_heap(need + need / 8 + (8u << 20));

	cpu_model(cpu, sizeof(cpu));
	if (run_variant(&kf, &o, "crc", kf.entries, 0, &res[nres]) == 0)
		nres++;
	else
		status = 1;
	if (status == 0) {
		if (run_variant(&kf, &o, "crc_ext", ext_entries, RTE_HASH_EXTRA_FLAGS_EXT_TABLE, &res[nres]) == 0)
			nres++;
		else
			status = 1;
	}
	if (status == 0) {
		for (i = 0; i < nres; i++)
			if (res[i].fill.refused == 0 && res[i].fill.inserts != kf.n_distinct)
				fprintf(stderr,
					"flowtable-dpdk: warning: %s inserted %" PRIu64
					" distinct keys, the file says n_distinct %" PRIu64 "\n",
					res[i].variant, res[i].fill.inserts, kf.n_distinct);
		if (o.json)
			print_json(&kf, &o, cpu, res, nres);
		else
			print_text(&kf, &o, cpu, res, nres);
	}
	for (i = 0; i < nres; i++)
		free(res[i].steady_samples);
	keyfile_close(&kf);
	rte_eal_cleanup();
	return status;
}
