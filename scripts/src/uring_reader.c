/*
 * uring_reader - random reads through io_uring with the ring's setup flags chosen by argument.
 *
 * fio cannot set IORING_SETUP_COOP_TASKRUN; this reader exists so that the IRQ affinity study
 * can compare task-run modes with everything else equal. One thread per CPU in --cpus, each
 * pinned to its CPU with a ring of its own, keeps --qdepth reads of --bs bytes in flight at
 * random aligned offsets of --file (a file or a block device) for --ramp then --runtime seconds.
 * Only completions inside the measured --runtime count; the report gives that window in
 * CLOCK_REALTIME ns ("window_ns": from the earliest thread's start to the latest's end).
 *
 * Output: one JSON object written to --output (schema_version 1): the arguments, the setup
 * flags the kernel accepted, per-thread and total I/Os and IOPS, and completion latency (submit
 * to completion, CLOCK_MONOTONIC) as mean and percentiles from a log-linear histogram (relative
 * error below 1/32). Errors of individual reads are counted and the first errno is named.
 *
 * --version prints "uring_reader <version> (liburing <version>)".
 * Exit status: 0 measured, 1 an I/O or system error (message on stderr), 2 a usage error.
 * Build: cc -O2 -pthread uring_reader.c -luring (scripts/drivers/uring_reader.sh does it).
 *
 * iolab-reader-version: 2
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#define READER_VERSION "2"
#ifndef LIBURING_VERSION                 /* the build passes pkg-config's answer */
#define LIBURING_VERSION "unknown"
#endif
#define MAX_CPUS 1024
#define SUB_BITS 5                       /* 32 linear sub-buckets per power of two */
#define NBUCKETS (64 << SUB_BITS)

struct options {
	const char *file, *output;
	unsigned bs, qdepth;
	double runtime_s, ramp_s;
	int cpus[MAX_CPUS], ncpus;
	int coop_taskrun, single_issuer, defer_taskrun, iopoll, direct;
	uint64_t seed;
};

struct worker {
	const struct options *opt;
	int cpu, fd;
	uint64_t size;
	pthread_t thread;
	uint64_t ios, errors, short_reads;
	int first_errno;
	double sum_ns;
	uint64_t hist[NBUCKETS];
	double measure_from, measure_to;     /* CLOCK_MONOTONIC seconds */
	unsigned setup_flags;
	int failed;
	char message[256];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static unsigned bucket_of(uint64_t v)
{
	if (v < (1u << SUB_BITS))
		return (unsigned)v;
	unsigned top = 63 - __builtin_clzll(v);          /* position of the highest set bit */
	unsigned shift = top - SUB_BITS;
	return ((shift + 1) << SUB_BITS) + (unsigned)((v >> shift) & ((1u << SUB_BITS) - 1));
}

static uint64_t bucket_high(unsigned b)             /* the largest value of a bucket */
{
	if (b < (1u << SUB_BITS))
		return b;
	unsigned shift = (b >> SUB_BITS) - 1;
	uint64_t base = ((uint64_t)(1u << SUB_BITS) + (b & ((1u << SUB_BITS) - 1))) << shift;
	return base + ((uint64_t)1 << shift) - 1;
}

static uint64_t next_random(uint64_t *state)        /* xorshift64* */
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static void usage(const char *problem)
{
	fprintf(stderr, "usage: uring_reader --file PATH --output FILE --cpus 0,1,... [--bs 4096] "
		"[--qdepth 32] [--runtime 5] [--ramp 0] [--coop-taskrun] [--single-issuer] "
		"[--defer-taskrun] [--iopoll] [--direct] [--seed N]\nuring_reader: %s\n", problem);
	exit(2);
}

static unsigned parse_unsigned(const char *flag, const char *text, unsigned lo, unsigned hi)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (errno || *end || end == text || v < lo || v > hi) {
		char msg[160];
		snprintf(msg, sizeof msg, "%s: '%s' is not a whole number from %u to %u", flag, text, lo, hi);
		usage(msg);
	}
	return (unsigned)v;
}

static double parse_seconds(const char *flag, const char *text)
{
	char *end;
	double v = strtod(text, &end);
	if (*end || end == text || !(v >= 0) || v > 86400) {
		char msg[160];
		snprintf(msg, sizeof msg, "%s: '%s' is not a number of seconds from 0 to 86400", flag, text);
		usage(msg);
	}
	return v;
}

static void parse_cpus(struct options *o, const char *text)
{
	char *copy = strdup(text), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->ncpus == MAX_CPUS)
			usage("--cpus: too many CPUs");
		o->cpus[o->ncpus++] = (int)parse_unsigned("--cpus", tok, 0, MAX_CPUS - 1);
	}
	free(copy);
	if (!o->ncpus)
		usage("--cpus: empty");
}

static void parse_args(struct options *o, int argc, char **argv)
{
	*o = (struct options){.bs = 4096, .qdepth = 32, .runtime_s = 5, .seed = 1};
	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("uring_reader %s (liburing %s)\n", READER_VERSION, LIBURING_VERSION);
		exit(0);
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDS_VALUE() do { if (!v) usage("an option needs a value"); i++; } while (0)
		if (!strcmp(a, "--file")) { NEEDS_VALUE(); o->file = v; }
		else if (!strcmp(a, "--output")) { NEEDS_VALUE(); o->output = v; }
		else if (!strcmp(a, "--cpus")) { NEEDS_VALUE(); parse_cpus(o, v); }
		else if (!strcmp(a, "--bs")) { NEEDS_VALUE(); o->bs = parse_unsigned(a, v, 512, 1u << 24); }
		else if (!strcmp(a, "--qdepth")) { NEEDS_VALUE(); o->qdepth = parse_unsigned(a, v, 1, 4096); }
		else if (!strcmp(a, "--runtime")) { NEEDS_VALUE(); o->runtime_s = parse_seconds(a, v); }
		else if (!strcmp(a, "--ramp")) { NEEDS_VALUE(); o->ramp_s = parse_seconds(a, v); }
		else if (!strcmp(a, "--seed")) { NEEDS_VALUE(); o->seed = parse_unsigned(a, v, 1, 0xffffffffu); }
		else if (!strcmp(a, "--coop-taskrun")) o->coop_taskrun = 1;
		else if (!strcmp(a, "--single-issuer")) o->single_issuer = 1;
		else if (!strcmp(a, "--defer-taskrun")) o->defer_taskrun = 1;
		else if (!strcmp(a, "--iopoll")) o->iopoll = 1;
		else if (!strcmp(a, "--direct")) o->direct = 1;
		else {
			char msg[160];
			snprintf(msg, sizeof msg, "unknown option '%s'", a);
			usage(msg);
		}
#undef NEEDS_VALUE
	}
	if (!o->file || !o->output || !o->ncpus)
		usage("--file, --output and --cpus are required");
	if (o->bs & (o->bs - 1))
		usage("--bs must be a power of two");
	if (o->runtime_s <= 0)
		usage("--runtime must be more than 0");
	if (o->iopoll && !o->direct)
		usage("--iopoll needs --direct (polled completions exist for direct I/O only)");
	if (o->defer_taskrun && !o->single_issuer)
		usage("--defer-taskrun needs --single-issuer (a kernel rule)");
}

static void fail(struct worker *w, const char *what, int err)
{
	snprintf(w->message, sizeof w->message, "CPU %d: %s: %s", w->cpu, what, strerror(err));
	w->failed = 1;
}

static void queue_read(struct worker *w, struct io_uring *ring, char *buf, uint64_t *rng)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	uint64_t blocks = w->size / w->opt->bs;
	uint64_t offset = (next_random(rng) % blocks) * w->opt->bs;
	io_uring_prep_read(sqe, w->fd, buf, w->opt->bs, offset);
	/* the submission time travels with the request */
	io_uring_sqe_set_data64(sqe, now_ns());
}

static void *work(void *arg)
{
	struct worker *w = arg;
	const struct options *o = w->opt;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	if (err) { fail(w, "cannot pin the thread", err); return NULL; }

	struct io_uring_params p = {0};
	p.flags = (o->coop_taskrun ? IORING_SETUP_COOP_TASKRUN : 0)
		| (o->single_issuer ? IORING_SETUP_SINGLE_ISSUER : 0)
		| (o->defer_taskrun ? IORING_SETUP_DEFER_TASKRUN : 0)
		| (o->iopoll ? IORING_SETUP_IOPOLL : 0);
	struct io_uring ring;
	err = io_uring_queue_init_params(o->qdepth, &ring, &p);
	if (err < 0) { fail(w, "io_uring_queue_init_params (are these setup flags supported?)", -err); return NULL; }
	w->setup_flags = p.flags;

	char *buffers;
	if (posix_memalign((void **)&buffers, 4096, (size_t)o->bs * o->qdepth)) {
		fail(w, "buffers", ENOMEM);
		io_uring_queue_exit(&ring);
		return NULL;
	}
	uint64_t rng = o->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)w->cpu + 1;
	for (unsigned i = 0; i < o->qdepth; i++)
		queue_read(w, &ring, buffers + (size_t)i * o->bs, &rng);
	io_uring_submit(&ring);

	double start = now_s(), measure_from = start + o->ramp_s, end = measure_from + o->runtime_s;
	w->measure_from = measure_from;
	w->measure_to = end;
	unsigned inflight = o->qdepth, slot = 0;
	while (inflight) {
		struct io_uring_cqe *cqe;
		err = io_uring_wait_cqe(&ring, &cqe);
		if (err < 0) { fail(w, "io_uring_wait_cqe", -err); break; }
		double t = now_s();
		uint64_t done_ns = now_ns();
		unsigned head, seen = 0, requeued = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			inflight--;
			uint64_t lat = done_ns - io_uring_cqe_get_data64(cqe);
			if (t >= measure_from && t < end) {
				if (cqe->res < 0) {
					if (!w->errors++)
						w->first_errno = -cqe->res;
				} else {
					if ((unsigned)cqe->res != o->bs)
						w->short_reads++;
					w->ios++;
					w->sum_ns += lat;
					w->hist[bucket_of(lat)]++;
				}
			}
			if (t < end && !(cqe->res < 0 && w->errors > 1000)) {
				queue_read(w, &ring, buffers + (size_t)(slot++ % o->qdepth) * o->bs, &rng);
				inflight++;
				requeued++;
			}
		}
		io_uring_cq_advance(&ring, seen);
		if (requeued)
			io_uring_submit(&ring);
	}
	free(buffers);
	io_uring_queue_exit(&ring);
	return NULL;
}

static uint64_t file_size(int fd)
{
	struct stat st;
	if (fstat(fd, &st))
		return 0;
	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes = 0;
		return ioctl(fd, BLKGETSIZE64, &bytes) ? 0 : bytes;
	}
	return (uint64_t)st.st_size;
}

static void string_json(FILE *f, const char *s)    /* a JSON string: quotes, escapes */
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void flags_json(FILE *f, unsigned flags)
{
	const char *names[] = {"IOPOLL", "COOP_TASKRUN", "SINGLE_ISSUER", "DEFER_TASKRUN"};
	unsigned bits[] = {IORING_SETUP_IOPOLL, IORING_SETUP_COOP_TASKRUN, IORING_SETUP_SINGLE_ISSUER,
			   IORING_SETUP_DEFER_TASKRUN};
	int first = 1;
	fputc('[', f);
	for (unsigned i = 0; i < sizeof bits / sizeof bits[0]; i++)
		if (flags & bits[i]) {
			fprintf(f, "%s\"%s\"", first ? "" : ", ", names[i]);
			first = 0;
		}
	fputc(']', f);
}

static uint64_t percentile(const uint64_t *hist, uint64_t n, double q)
{
	uint64_t rank = (uint64_t)(q * (double)n + 0.999999), seen = 0;
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += hist[b];
		if (seen >= rank)
			return bucket_high(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct options o;
	parse_args(&o, argc, argv);
	int fd = open(o.file, O_RDONLY | (o.direct ? O_DIRECT : 0));
	if (fd < 0) {
		fprintf(stderr, "uring_reader: cannot open %s: %s\n", o.file, strerror(errno));
		return 1;
	}
	uint64_t size = file_size(fd);
	if (size < o.bs) {
		fprintf(stderr, "uring_reader: %s holds %" PRIu64 " bytes, less than one read of %u\n",
			o.file, size, o.bs);
		return 1;
	}
	struct timespec real, mono;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	/* realtime = monotonic + offset, to report the window on the clock other tools use */
	double offset_s = (real.tv_sec - mono.tv_sec) + (real.tv_nsec - mono.tv_nsec) / 1e9;
	struct worker *w = calloc(o.ncpus, sizeof *w);
	for (int i = 0; i < o.ncpus; i++) {
		w[i] = (struct worker){.opt = &o, .cpu = o.cpus[i], .fd = fd, .size = size};
		int err = pthread_create(&w[i].thread, NULL, work, &w[i]);
		if (err) {
			fprintf(stderr, "uring_reader: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	static uint64_t hist[NBUCKETS];
	uint64_t ios = 0, errors = 0, short_reads = 0;
	double sum_ns = 0, window_from = 0, window_to = 0;
	int failed = 0, first_errno = 0;
	for (int i = 0; i < o.ncpus; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].failed) {
			fprintf(stderr, "uring_reader: %s\n", w[i].message);
			failed = 1;
		}
		ios += w[i].ios;
		errors += w[i].errors;
		short_reads += w[i].short_reads;
		sum_ns += w[i].sum_ns;
		if (!first_errno)
			first_errno = w[i].first_errno;
		if (!i || w[i].measure_from < window_from)
			window_from = w[i].measure_from;
		if (!i || w[i].measure_to > window_to)
			window_to = w[i].measure_to;
		for (unsigned b = 0; b < NBUCKETS; b++)
			hist[b] += w[i].hist[b];
	}
	if (failed)
		return 1;
	FILE *f = fopen(o.output, "w");
	if (!f) {
		fprintf(stderr, "uring_reader: cannot write %s: %s\n", o.output, strerror(errno));
		return 1;
	}
	fprintf(f, "{\"schema_version\": 1, \"tool\": \"uring_reader\", \"version\": \"%s\", "
		"\"liburing\": \"%s\",\n", READER_VERSION, LIBURING_VERSION);
	fprintf(f, " \"file\": ");
	string_json(f, o.file);
	fprintf(f, ", \"bytes\": %" PRIu64 ", \"bs\": %u, \"qdepth\": %u, "
		"\"runtime_s\": %g, \"ramp_s\": %g, \"direct\": %s, \"seed\": %" PRIu64 ",\n",
		size, o.bs, o.qdepth, o.runtime_s, o.ramp_s, o.direct ? "true" : "false", o.seed);
	fprintf(f, " \"window_ns\": [%.0f, %.0f],\n", (window_from + offset_s) * 1e9,
		(window_to + offset_s) * 1e9);
	fprintf(f, " \"setup_flags\": ");
	flags_json(f, w[0].setup_flags);
	fprintf(f, ",\n \"threads\": [");
	for (int i = 0; i < o.ncpus; i++)
		fprintf(f, "%s{\"cpu\": %d, \"ios\": %" PRIu64 ", \"iops\": %.1f}", i ? ", " : "",
			w[i].cpu, w[i].ios, w[i].ios / o.runtime_s);
	fprintf(f, "],\n \"ios\": %" PRIu64 ", \"iops\": %.1f, \"mibs\": %.3f, \"errors\": %" PRIu64
		", \"first_errno\": %d, \"first_error\": \"%s\", \"short_reads\": %" PRIu64 ",\n",
		ios, ios / o.runtime_s, ios * (double)o.bs / o.runtime_s / 1048576.0, errors,
		first_errno, first_errno ? strerror(first_errno) : "", short_reads);
	fprintf(f, " \"lat_ns\": {\"mean\": %.1f, \"p50\": %" PRIu64 ", \"p90\": %" PRIu64
		", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64 ", \"max\": %" PRIu64 "}}\n",
		ios ? sum_ns / ios : 0.0, percentile(hist, ios, 0.5), percentile(hist, ios, 0.9),
		percentile(hist, ios, 0.99), percentile(hist, ios, 0.999), percentile(hist, ios, 1.0));
	if (fclose(f)) {
		fprintf(stderr, "uring_reader: cannot write %s: %s\n", o.output, strerror(errno));
		return 1;
	}
	if (errors) {
		fprintf(stderr, "uring_reader: %" PRIu64 " reads failed, the first with: %s\n", errors,
			strerror(first_errno));
		return 1;
	}
	return 0;
}
