// gpu_pcie_probe - one measured point of a GPU's PCIe link, with the CUDA runtime.
//
// What it measures, in one of three modes:
//   copy   the copy engines: --bytes N moved by cudaMemcpyAsync between a pinned host buffer
//          (cudaHostAlloc) and a device buffer (cudaMalloc), --direction h2d or d2h; a timed
//          operation is --copies such copies queued back to back (default 1), so that a long
//          steady transfer can be timed without a gap between copies.
//   read   GPU-initiated reads of host memory: a host buffer of --buffer bytes, pinned and mapped
//          into the GPU (cudaHostAlloc with cudaHostAllocMapped, "zero-copy"), read by a kernel of
//          --inflight warps in all (blocks of 256 threads, 8 warps each). Each warp performs
//          --requests-per-warp requests, one after the other; one request is the warp's 32 lanes
//          reading --iosize contiguous bytes at a random offset aligned to --iosize, in 16-byte
//          vector loads (uint4): lane l loads the 16-byte elements l, l+32, l+64, ... A lane keeps
//          up to 4 of its loads of a request in flight at a time (2 KiB of the request for the
//          warp), and a warp's next request starts only when its previous one has arrived, so
//          --inflight is the number of requests in flight (at most "resident_warps" of them can
//          run at once: the rest wait for a free slot on an SM). The buffer holds a known
//          pattern, so the checksum depends on the arguments alone.
//   write  GPU-initiated writes: the same, with stores of a pattern instead of loads (stores do
//          not wait for each other, so a warp's requests overlap). A launch's stop event
//          completes only once the kernel's stores are visible to the host.
// Offsets come from a per-warp xorshift64* generator seeded from --seed, the warp's index and the
// launch's number (warm-up launches count too), so every launch touches other places.
//
// Why every request crosses PCIe: the GPU does not cache mapped host memory ("the data is not
// cached on the GPU", CUDA Best Practices Guide, Zero Copy), and the loads are ld.global.cv
// (__ldcv: "consider cached system memory lines stale, fetch again") and the stores st.global.wt
// (__stwt: write through to system memory), so nothing is served from, or kept in, L1 or L2.
// Loaded data is XOR-folded per lane, folded across the warp, and written once per warp to a
// device array (the "sink"), so the compiler cannot drop a load; "checksum" is the XOR of that
// array after the last timed launch.
//
// Timing: --warmup untimed operations (copies or launches), then --iterations timed ones, each
// between its own pair of CUDA events (cudaEventElapsedTime) on one stream, checked and waited
// for one by one. Before each timed operation a one-thread "gate" kernel holds the stream until
// the host has queued the start event, the operation and the stop event, so the host's time to
// queue them is not timed. "window_ns" gives CLOCK_REALTIME (ns) just before the first timed
// operation and just after the last one finished.
//
// Usage:
//   gpu_pcie_probe --version
//       prints "gpu_pcie_probe 1 (CUDA runtime <major>.<minor>)"; needs no GPU
//   gpu_pcie_probe --output FILE --mode copy --direction h2d|d2h --bytes N
//                  --iterations K --warmup W [--device D] [--copies C]
//   gpu_pcie_probe --output FILE --mode read|write --iosize N --inflight W
//                  --requests-per-warp R --iterations K --warmup W
//                  [--device D] [--buffer BYTES] [--seed S]
// Every option takes a value, as "--name value". Allowed values:
//   --bytes 4096 to 1073741824; --iosize a power of two from 512 to 1048576; --inflight a
//   multiple of 32 from 32 to 1048576 (warps); --requests-per-warp 1 to 16777216; --iterations
//   1 to 1000000; --warmup 0 to 1000000; --device 0 to 1023 (a CUDA ordinal); --copies 1 to
//   1000000 (default 1); --buffer from
//   64 x --iosize to 1099511627776 (default 1073741824); --seed 0 to 2^64-1 (default 1).
//
// Output: one JSON object written to FILE (through FILE.tmp, renamed when complete):
//   {"schema_version": 1, "probe_version": "1", "cuda_runtime": 12040, "cuda_driver": 12040,
//    "device": {"index": 0, "name": "...", "pci_bus_id": "0000:4b:00.0", "sms": 132,
//               "max_threads_per_sm": 2048},
//    "mode": "copy"|"read"|"write", "direction": "h2d"|"d2h"|null,
//    "bytes": N|null, "iosize": N|null, "inflight": W|null, "requests_per_warp": R|null,
//    "resident_warps": <warps that fit on the GPU at once, at most W>|null,
//    "buffer_bytes": BYTES|null, "warmup": W, "seed": S|null,
//    "iterations": [{"seconds": 1.234e-05, "bytes": 4096, "requests": 1}, ...],
//    "window_ns": [start, end], "checksum": <XOR of the sink; 0 for copy and write>}
//   The nulls are the fields of the other modes. "bytes" and "requests" of an iteration are what
//   it moved: C x N and C for copies; W x R x iosize and W x R for a launch.
//
// Exit status: 0 measured; 1 a CUDA or system error (no CUDA device, --device out of range,
// out of memory, a failing kernel, an unwritable FILE), said on stderr as
// "gpu_pcie_probe: <CUDA call>: <CUDA's error string>", and no FILE is written;
// 2 a usage error, said as "gpu_pcie_probe: <what> (allowed: ...)".
//
// Build: nvcc -O3 -std=c++17 -arch=native -o gpu_pcie_probe gpu_pcie_probe.cu
// (scripts/drivers/gpu_pcie_probe.sh does it, and falls back to -arch=sm_90).
//
// iolab-probe-version: 1

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

typedef unsigned long long u64;

static const char kProbeVersion[] = "1";
constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;
constexpr long long kGateCycles = 1ll << 36;   // about half a minute at 2 GHz
constexpr u64 kGolden = 0x9E3779B97F4A7C15ull;

// ---- errors ----------------------------------------------------------------------------------

[[noreturn]] static void fail(const char *what, const char *why)
{
	fprintf(stderr, "gpu_pcie_probe: %s: %s\n", what, why);
	exit(1);
}

// Every CUDA call goes through CHECK; the message names the function called.
static void check(cudaError_t err, const char *call)
{
	if (err == cudaSuccess)
		return;
	std::string name(call);
	name = name.substr(0, name.find('('));
	fail(name.c_str(), cudaGetErrorString(err));
}
#define CHECK(call) check((call), #call)

// ---- the command line ------------------------------------------------------------------------

enum Mode { MODE_NONE = 0, MODE_COPY = 1, MODE_READ = 2, MODE_WRITE = 4 };

struct Options {
	const char *output = nullptr;
	Mode mode = MODE_NONE;
	const char *direction = nullptr;   // "h2d" or "d2h"
	u64 bytes = 0, iosize = 0, inflight = 0, requests = 0, iterations = 0, warmup = 0;
	u64 device = 0, buffer = 1ull << 30, seed = 1, copies = 1;
};

struct NumberOption {
	const char *name;
	u64 Options::*field;
	u64 lo, hi;
	unsigned modes;                    // the modes it applies to
	bool required;                     // in those modes
	const char *allowed;
};

static const NumberOption kNumbers[] = {
	{"--bytes", &Options::bytes, 4096, 1ull << 30, MODE_COPY, true,
	 "a whole number from 4096 to 1073741824"},
	{"--iosize", &Options::iosize, 512, 1ull << 20, MODE_READ | MODE_WRITE, true,
	 "a power of two from 512 to 1048576"},
	{"--inflight", &Options::inflight, 32, 1ull << 20, MODE_READ | MODE_WRITE, true,
	 "a multiple of 32 from 32 to 1048576"},
	{"--requests-per-warp", &Options::requests, 1, 1ull << 24, MODE_READ | MODE_WRITE, true,
	 "a whole number from 1 to 16777216"},
	{"--iterations", &Options::iterations, 1, 1000000, MODE_COPY | MODE_READ | MODE_WRITE, true,
	 "a whole number from 1 to 1000000"},
	{"--warmup", &Options::warmup, 0, 1000000, MODE_COPY | MODE_READ | MODE_WRITE, true,
	 "a whole number from 0 to 1000000"},
	{"--device", &Options::device, 0, 1023, MODE_COPY | MODE_READ | MODE_WRITE, false,
	 "a whole number from 0 to 1023"},
	{"--copies", &Options::copies, 1, 1000000, MODE_COPY, false,
	 "a whole number from 1 to 1000000"},
	{"--buffer", &Options::buffer, 64 * 512, 1ull << 40, MODE_READ | MODE_WRITE, false,
	 "a whole number of bytes from 64 x --iosize to 1099511627776"},
	{"--seed", &Options::seed, 0, ~0ull, MODE_READ | MODE_WRITE, false,
	 "a whole number from 0 to 18446744073709551615"},
};

static const char kAllOptions[] = "--output, --mode, --direction, --bytes, --iosize, --inflight, "
	"--requests-per-warp, --iterations, --warmup, --device, --copies, --buffer, --seed; or --version alone";

[[noreturn]] static void usage(const std::string &what, const std::string &allowed)
{
	fprintf(stderr, "gpu_pcie_probe: %s (allowed: %s)\n", what.c_str(), allowed.c_str());
	fprintf(stderr,
		"usage: gpu_pcie_probe --version\n"
		"       gpu_pcie_probe --output FILE --mode copy --direction h2d|d2h --bytes N "
		"--iterations K --warmup W [--device D] [--copies C]\n"
		"       gpu_pcie_probe --output FILE --mode read|write --iosize N --inflight W "
		"--requests-per-warp R --iterations K --warmup W [--device D] [--buffer BYTES] "
		"[--seed S]\n");
	exit(2);
}

// Digits only (no sign, no spaces), without overflow.
static bool parse_u64(const char *text, u64 *out)
{
	if (!*text)
		return false;
	u64 v = 0;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		u64 digit = (u64)(*p - '0');
		if (v > (~0ull - digit) / 10)
			return false;
		v = v * 10 + digit;
	}
	*out = v;
	return true;
}

static const char *mode_name(Mode m)
{
	return m == MODE_COPY ? "copy" : m == MODE_READ ? "read" : "write";
}

static Options parse_args(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--version") && argc != 2)
			usage("--version takes no other option", "--version alone");
	if (argc == 2 && !strcmp(argv[1], "--version")) {
		int runtime = 0;
		CHECK(cudaRuntimeGetVersion(&runtime));
		printf("gpu_pcie_probe %s (CUDA runtime %d.%d)\n", kProbeVersion, runtime / 1000,
		       runtime % 1000 / 10);
		exit(0);
	}
	std::vector<std::string> given;
	for (int i = 1; i < argc; i++) {
		const std::string name = argv[i];
		const NumberOption *number = nullptr;
		for (const NumberOption &n : kNumbers)
			if (name == n.name)
				number = &n;
		const char *allowed = number ? number->allowed
			: name == "--output" ? "a file name"
			: name == "--mode" ? "copy, read, write"
			: name == "--direction" ? "h2d, d2h" : nullptr;
		if (!allowed)
			usage("unknown option '" + name + "'", kAllOptions);
		for (const std::string &g : given)
			if (g == name)
				usage(name + " given twice", "each option once");
		given.push_back(name);
		// "--output --mode" means the value was left out
		if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
			usage(name + " needs a value", allowed);
		const char *value = argv[++i];
		const std::string bad = name + ": '" + value + "' is not allowed";
		if (number) {
			u64 v;
			if (!parse_u64(value, &v) || v < number->lo || v > number->hi)
				usage(bad, allowed);
			if (name == "--iosize" && (v & (v - 1)))
				usage(bad, allowed);
			if (name == "--inflight" && v % 32)
				usage(bad, allowed);
			o.*(number->field) = v;
		} else if (name == "--output") {
			if (!*value)
				usage(bad, allowed);
			o.output = value;
		} else if (name == "--mode") {
			o.mode = !strcmp(value, "copy") ? MODE_COPY : !strcmp(value, "read") ? MODE_READ
				: !strcmp(value, "write") ? MODE_WRITE : MODE_NONE;
			if (o.mode == MODE_NONE)
				usage(bad, allowed);
		} else {
			if (strcmp(value, "h2d") && strcmp(value, "d2h"))
				usage(bad, allowed);
			o.direction = value;
		}
	}
	if (!o.output)
		usage("--output is required", "a file name");
	if (o.mode == MODE_NONE)
		usage("--mode is required", "copy, read, write");
	const std::string in_mode = std::string("--mode ") + mode_name(o.mode);
	std::string applies = "--output, --mode";
	if (o.mode == MODE_COPY)
		applies += ", --direction";
	for (const NumberOption &n : kNumbers)
		if (n.modes & o.mode)
			applies += std::string(", ") + n.name;
	for (const std::string &g : given) {
		bool fits = g == "--output" || g == "--mode" || (g == "--direction" && o.mode == MODE_COPY);
		for (const NumberOption &n : kNumbers)
			if (g == n.name && (n.modes & o.mode))
				fits = true;
		if (!fits)
			usage(g + " does not apply to " + in_mode, "with " + in_mode + ": " + applies);
	}
	if (o.mode == MODE_COPY && !o.direction)
		usage(in_mode + " needs --direction", "h2d, d2h");
	for (const NumberOption &n : kNumbers) {
		if (!n.required || !(n.modes & o.mode))
			continue;
		bool was_given = false;
		for (const std::string &g : given)
			was_given = was_given || g == n.name;
		if (!was_given)
			usage(in_mode + " needs " + n.name, n.allowed);
	}
	// inflight x requests <= 2^44 here; the bytes of one launch must fit the report's integers
	if (o.mode != MODE_COPY && o.inflight * o.requests > (1ull << 60) / o.iosize)
		usage("--inflight x --requests-per-warp x --iosize is more than 2^60 bytes a launch",
		      "at most 2^60 bytes a launch");
	if (o.mode != MODE_COPY && o.buffer < 64 * o.iosize)
		usage("--buffer: " + std::to_string(o.buffer) + " is less than 64 x --iosize",
		      "a whole number of bytes from " + std::to_string(64 * o.iosize) + " to 1099511627776");
	return o;
}

// ---- the kernels -----------------------------------------------------------------------------

__host__ __device__ u64 splitmix64(u64 x)
{
	x += kGolden;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

// A warp's generator: every lane of the warp computes the same state, so all agree on offsets.
__device__ u64 warp_state(u64 seed, u64 warp, u64 launch)
{
	u64 s = splitmix64(seed ^ splitmix64(warp ^ splitmix64(launch)));
	return s ? s : kGolden;            // xorshift must not start at 0
}

__device__ u64 next_random(u64 &s)   // xorshift64*
{
	s ^= s >> 12;
	s ^= s << 25;
	s ^= s >> 27;
	return s * 0x2545F4914F6CDD1Dull;
}

// Holds the stream until the host has stored want in flag[0]; flag[1] = 1 if it gave up.
// flag is mapped host memory, read through volatile loads that go to the host every time.
__global__ void gate_kernel(volatile unsigned *flag, unsigned want)
{
	const long long start = clock64();
	while (flag[0] < want) {
		if (clock64() - start > kGateCycles) {
			flag[1] = 1;
			return;
		}
#if __CUDA_ARCH__ >= 700
		__nanosleep(1000);
#endif
	}
}

// One request: rows = iosize / 512 loads of 16 bytes per lane, B of them in flight at a time
// (B divides rows: both are powers of two and B <= rows).
template <int B>
__global__ void __launch_bounds__(kBlockThreads)
read_kernel(const uint4 *buf, u64 slots, unsigned rows, unsigned requests, u64 seed, u64 launch,
	    unsigned zero, u64 *sink)
{
	const unsigned lane = threadIdx.x % 32;
	const u64 warp = (u64)blockIdx.x * kBlockWarps + threadIdx.x / 32;
	u64 state = warp_state(seed, warp, launch);
	u64 acc = 0;
#pragma unroll 1
	for (unsigned r = 0; r < requests; r++) {
		const u64 slot = __umul64hi(next_random(state), slots);   // in [0, slots)
		const uint4 *io = buf + slot * rows * 32 + lane;
		u64 fold = 0;
#pragma unroll 1
		for (unsigned row = 0; row < rows; row += B) {
			uint4 v[B];
#pragma unroll
			for (int b = 0; b < B; b++)
				v[b] = __ldcv(io + (u64)(row + b) * 32);
#pragma unroll
			for (int b = 0; b < B; b++)
				fold ^= ((u64)v[b].y << 32 | v[b].x) ^ ((u64)v[b].w << 32 | v[b].z);
		}
		acc ^= fold;
		// zero is 0, which the compiler cannot know: the next offset "depends" on this
		// request's data, so the warp cannot issue its next request before this one arrived
		state ^= fold & zero;
	}
	for (int offset = 16; offset > 0; offset /= 2)
		acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
	if (lane == 0)
		sink[warp] = acc;
}

__global__ void __launch_bounds__(kBlockThreads)
write_kernel(uint4 *buf, u64 slots, unsigned rows, unsigned requests, u64 seed, u64 launch)
{
	const unsigned lane = threadIdx.x % 32;
	const u64 warp = (u64)blockIdx.x * kBlockWarps + threadIdx.x / 32;
	u64 state = warp_state(seed, warp, launch);
#pragma unroll 1
	for (unsigned r = 0; r < requests; r++) {
		const u64 slot = __umul64hi(next_random(state), slots);
		uint4 *io = buf + slot * rows * 32 + lane;
		const uint4 pattern = make_uint4((unsigned)warp, (unsigned)(warp >> 32), r,
						 (unsigned)launch);
		for (unsigned row = 0; row < rows; row++)   // stores do not wait: all in flight
			__stwt(io + (u64)row * 32, pattern);
	}
}

typedef void (*ReadKernel)(const uint4 *, u64, unsigned, unsigned, u64, u64, unsigned, u64 *);

// ---- measuring -------------------------------------------------------------------------------

struct Iteration {
	double seconds;
	u64 bytes, requests;
};

struct Result {
	int runtime = 0, driver = 0;
	std::string name, bus_id;
	int sms = 0, max_threads_per_sm = 0;
	long long resident_warps = -1;     // -1: null
	std::vector<Iteration> iterations;
	long long window_ns[2] = {0, 0};
	u64 checksum = 0;
};

static long long realtime_ns()
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts))
		fail("clock_gettime", strerror(errno));
	return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// The timed part, common to all modes: op(k) queues the k-th timed operation on stream.
template <class Op>
static void timed(const Options &o, cudaStream_t stream, u64 bytes, u64 requests, Op op,
		  Result &res)
{
	unsigned *flag_host = nullptr, *flag_dev = nullptr;
	CHECK(cudaHostAlloc((void **)&flag_host, 2 * sizeof(unsigned), cudaHostAllocMapped));
	CHECK(cudaHostGetDevicePointer((void **)&flag_dev, flag_host, 0));
	volatile unsigned *flag = flag_host;
	flag[0] = 0;
	flag[1] = 0;
	res.window_ns[0] = realtime_ns();
	for (u64 k = 0; k < o.iterations; k++) {
		cudaEvent_t start, stop;
		CHECK(cudaEventCreate(&start));
		CHECK(cudaEventCreate(&stop));
		gate_kernel<<<1, 1, 0, stream>>>(flag_dev, (unsigned)(k + 1));
		CHECK(cudaGetLastError());
		CHECK(cudaEventRecord(start, stream));
		op(k);
		CHECK(cudaEventRecord(stop, stream));
		flag[0] = (unsigned)(k + 1);   // all of it is queued: open the gate
		CHECK(cudaEventSynchronize(stop));
		if (flag[1])
			fail("gate_kernel", "the host's signal never reached the GPU");
		float ms = 0;
		CHECK(cudaEventElapsedTime(&ms, start, stop));
		res.iterations.push_back({ms / 1e3, bytes, requests});
		CHECK(cudaEventDestroy(start));
		CHECK(cudaEventDestroy(stop));
	}
	res.window_ns[1] = realtime_ns();
	CHECK(cudaFreeHost(flag_host));
}

static void measure_copy(const Options &o, cudaStream_t stream, Result &res)
{
	const size_t n = (size_t)o.bytes;
	void *host = nullptr, *dev = nullptr;
	CHECK(cudaHostAlloc(&host, n, cudaHostAllocDefault));
	memset(host, 0x5a, n);
	CHECK(cudaMalloc(&dev, n));
	CHECK(cudaMemset(dev, 0, n));
	CHECK(cudaDeviceSynchronize());
	const bool h2d = !strcmp(o.direction, "h2d");
	auto copy = [&](u64) {
		for (u64 c = 0; c < o.copies; c++)
			if (h2d)
				CHECK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream));
			else
				CHECK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream));
	};
	for (u64 w = 0; w < o.warmup; w++) {
		copy(w);
		CHECK(cudaStreamSynchronize(stream));
	}
	timed(o, stream, o.copies * o.bytes, o.copies, copy, res);
	CHECK(cudaFree(dev));
	CHECK(cudaFreeHost(host));
}

static void measure_kernel(const Options &o, cudaStream_t stream, Result &res)
{
	const bool reading = o.mode == MODE_READ;
	const size_t size = (size_t)o.buffer;
	const u64 slots = o.buffer / o.iosize;
	const unsigned rows = (unsigned)(o.iosize / 512);   // 16-byte loads per lane and request
	void *host = nullptr, *mapped = nullptr;
	CHECK(cudaHostAlloc(&host, size, cudaHostAllocMapped));
	if (reading) {   // known contents: the checksum depends on the arguments alone
		u64 *words = (u64 *)host;
		for (size_t i = 0; i < size / sizeof(u64); i++)
			words[i] = (u64)i * kGolden;
	}
	CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
	u64 *sink = nullptr;
	CHECK(cudaMalloc((void **)&sink, o.inflight * sizeof(u64)));
	CHECK(cudaMemset(sink, 0, o.inflight * sizeof(u64)));
	CHECK(cudaDeviceSynchronize());

	ReadKernel read_fn = read_kernel<1>;   // B loads in flight per lane: min(rows, 4)
	if (rows == 2)
		read_fn = read_kernel<2>;
	else if (rows >= 4)
		read_fn = read_kernel<4>;
	int blocks_per_sm = 0;
	if (reading)
		CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_fn,
								    kBlockThreads, 0));
	else
		CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, write_kernel,
								    kBlockThreads, 0));
	const long long fit = (long long)blocks_per_sm * res.sms * kBlockWarps;
	res.resident_warps = fit < (long long)o.inflight ? fit : (long long)o.inflight;

	const dim3 grid((unsigned)(o.inflight / kBlockWarps)), block(kBlockThreads);
	const unsigned requests = (unsigned)o.requests;
	auto launch = [&](u64 number) {
		if (reading)
			read_fn<<<grid, block, 0, stream>>>((const uint4 *)mapped, slots, rows,
							    requests, o.seed, number, 0u, sink);
		else
			write_kernel<<<grid, block, 0, stream>>>((uint4 *)mapped, slots, rows, requests,
								 o.seed, number);
		CHECK(cudaGetLastError());
	};
	for (u64 w = 0; w < o.warmup; w++) {
		launch(w);
		CHECK(cudaStreamSynchronize(stream));
	}
	timed(o, stream, o.inflight * o.requests * o.iosize, o.inflight * o.requests,
	      [&](u64 k) { launch(o.warmup + k); }, res);
	if (reading) {
		std::vector<u64> folded(o.inflight);
		CHECK(cudaMemcpy(folded.data(), sink, o.inflight * sizeof(u64), cudaMemcpyDeviceToHost));
		for (u64 v : folded)
			res.checksum ^= v;
	}
	CHECK(cudaFree(sink));
	CHECK(cudaFreeHost(host));
}

// ---- the report ------------------------------------------------------------------------------

static void string_json(FILE *f, const char *s)   // a JSON string: quotes, escapes
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

static void number_or_null(FILE *f, const char *key, bool present, u64 value)
{
	if (present)
		fprintf(f, "\"%s\": %llu", key, value);
	else
		fprintf(f, "\"%s\": null", key);
}

static void write_report(const Options &o, const Result &r)
{
	const std::string tmp = std::string(o.output) + ".tmp";
	FILE *f = fopen(tmp.c_str(), "w");
	if (!f)
		fail(("cannot write " + tmp).c_str(), strerror(errno));
	const bool copy = o.mode == MODE_COPY;
	fprintf(f, "{\"schema_version\": 1, \"probe_version\": \"%s\", \"cuda_runtime\": %d, "
		"\"cuda_driver\": %d,\n", kProbeVersion, r.runtime, r.driver);
	fprintf(f, " \"device\": {\"index\": %llu, \"name\": ", o.device);
	string_json(f, r.name.c_str());
	fprintf(f, ", \"pci_bus_id\": ");
	string_json(f, r.bus_id.c_str());
	fprintf(f, ", \"sms\": %d, \"max_threads_per_sm\": %d},\n", r.sms, r.max_threads_per_sm);
	fprintf(f, " \"mode\": \"%s\", \"direction\": ", mode_name(o.mode));
	if (copy)
		string_json(f, o.direction);
	else
		fprintf(f, "null");
	fprintf(f, ", ");
	number_or_null(f, "bytes", copy, o.bytes);
	fprintf(f, ", ");
	number_or_null(f, "iosize", !copy, o.iosize);
	fprintf(f, ", ");
	number_or_null(f, "inflight", !copy, o.inflight);
	fprintf(f, ", ");
	number_or_null(f, "requests_per_warp", !copy, o.requests);
	fprintf(f, ", ");
	number_or_null(f, "resident_warps", r.resident_warps >= 0, (u64)r.resident_warps);
	fprintf(f, ",\n ");
	number_or_null(f, "buffer_bytes", !copy, o.buffer);
	fprintf(f, ", \"warmup\": %llu, ", o.warmup);
	number_or_null(f, "seed", !copy, o.seed);
	fprintf(f, ",\n \"iterations\": [");
	for (size_t i = 0; i < r.iterations.size(); i++)
		fprintf(f, "%s{\"seconds\": %.9e, \"bytes\": %llu, \"requests\": %llu}", i ? ",\n  " : "",
			r.iterations[i].seconds, r.iterations[i].bytes, r.iterations[i].requests);
	fprintf(f, "],\n \"window_ns\": [%lld, %lld], \"checksum\": %llu}\n", r.window_ns[0],
		r.window_ns[1], r.checksum);
	if (ferror(f) | fclose(f)) {
		int err = errno;
		remove(tmp.c_str());
		fail(("cannot write " + tmp).c_str(), strerror(err));
	}
	if (rename(tmp.c_str(), o.output)) {
		int err = errno;
		remove(tmp.c_str());
		fail(("cannot rename " + tmp + " to " + o.output).c_str(), strerror(err));
	}
}

int main(int argc, char **argv)
{
	const Options o = parse_args(argc, argv);
	Result r;
	CHECK(cudaRuntimeGetVersion(&r.runtime));
	CHECK(cudaDriverGetVersion(&r.driver));
	int count = 0;
	const cudaError_t counted = cudaGetDeviceCount(&count);
	if (counted != cudaSuccess && r.driver == 0) {
		std::string why = cudaGetErrorString(counted);
		fail("cudaGetDeviceCount", (why + " (no NVIDIA driver is loaded: no GPU here?)").c_str());
	}
	check(counted, "cudaGetDeviceCount");
	if (count == 0)
		fail("cudaGetDeviceCount", cudaGetErrorString(cudaErrorNoDevice));
	if (o.device >= (u64)count) {
		std::string why = cudaGetErrorString(cudaErrorInvalidDevice);
		why += " (--device " + std::to_string(o.device) + ", but CUDA sees " +
			std::to_string(count) + (count == 1 ? " device)" : " devices)");
		fail("cudaSetDevice", why.c_str());
	}
	const int device = (int)o.device;
	CHECK(cudaSetDevice(device));
	cudaDeviceProp prop;
	CHECK(cudaGetDeviceProperties(&prop, device));
	r.name = prop.name;
	char bus_id[64] = "";
	CHECK(cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device));
	r.bus_id = bus_id;
	CHECK(cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, device));
	CHECK(cudaDeviceGetAttribute(&r.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
				     device));
	cudaStream_t stream;
	CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	if (o.mode == MODE_COPY)
		measure_copy(o, stream, r);
	else
		measure_kernel(o, stream, r);
	CHECK(cudaStreamDestroy(stream));
	write_report(o, r);
	return 0;
}
