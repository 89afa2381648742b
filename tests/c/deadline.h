/*
 * Deadlines for the C tests, built from the clock's reading now, never from absolute constants:
 * CLOCK_MONOTONIC counts from boot, and a freshly booted CI machine reads a few seconds on it,
 * so a "past" deadline of, say, 500 s would lie in the future there and a matching wait would
 * block on it. Also the clock read in ns, for the C benchmarks.
 */
#ifndef UFUTEX_TESTS_DEADLINE_H
#define UFUTEX_TESTS_DEADLINE_H

#include <stdint.h>
#include <time.h>

/*
 * `back_ns` nanoseconds before now on `clk`, clamped at 0 (a clock that reads less than that
 * gives its epoch, still in the past). For a clock the calls reject anyway (not MONOTONIC or
 * REALTIME, or one clock_gettime does not know), the value is `back_ns` itself: any valid
 * timespec serves there.
 */
static inline struct timespec ts_before_now(clockid_t clk, uint64_t back_ns)
{
	const uint64_t NS = 1000000000ULL;
	struct timespec now;
	if ((clk != CLOCK_MONOTONIC && clk != CLOCK_REALTIME) || clock_gettime(clk, &now) != 0)
		return (struct timespec){.tv_sec = (time_t)(back_ns / NS), .tv_nsec = (long)(back_ns % NS)};
	uint64_t t = (uint64_t)now.tv_sec * NS + (uint64_t)now.tv_nsec;
	t = t > back_ns ? t - back_ns : 0;
	return (struct timespec){.tv_sec = (time_t)(t / NS), .tv_nsec = (long)(t % NS)};
}

/* CLOCK_MONOTONIC now, in ns (the benchmarks' clock). */
static inline double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* `ahead_ns` nanoseconds after now on `clk` (a clock clock_gettime knows). */
static inline struct timespec ts_after_now(clockid_t clk, uint64_t ahead_ns)
{
	const uint64_t NS = 1000000000ULL;
	struct timespec now;
	clock_gettime(clk, &now);
	uint64_t nsec = (uint64_t)now.tv_nsec + ahead_ns % NS;
	return (struct timespec){.tv_sec = now.tv_sec + (time_t)(ahead_ns / NS + nsec / NS), .tv_nsec = (long)(nsec % NS)};
}

#endif
